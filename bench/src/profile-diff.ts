/**
 * `tsx src/profile-diff.ts <a.cpuprofile> <requests a> <b.cpuprofile> <requests b> [top]`: self time per function of
 * two servers' CPU profiles (BENCH_CPU_PROF) in µs per request, largest differences first, to see where one
 * contender spends more than another in the same run. Time comes from the profiles' sample intervals, idle left out.
 * Under load the sampler counts time a descheduled process waited against the function it stopped in, so compare
 * profiles of one run (the same load on both) and read the differences, not the absolute figures.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

function selfTimes(file: string): { self: Map<string, number>; busy: number } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as {
    nodes: ProfileNode[];
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    // A sample's delta is the time until the next one: the time it stands for.
    const micros = profile.timeDeltas[i + 1] ?? 0;
    if (functionName === '(idle)') return;
    busy += micros;
    const where = url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(packages|bench)\//, '$1/');
    const name = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
    self.set(name, (self.get(name) ?? 0) + micros);
  });
  return { self, busy };
}

const [fileA, requestsA, fileB, requestsB, top] = process.argv.slice(2);
if (!fileA || !fileB) {
  throw new Error('usage: tsx src/profile-diff.ts <a.cpuprofile> <requests a> <b.cpuprofile> <requests b> [top]');
}
const a = selfTimes(fileA);
const b = selfTimes(fileB);
const perA = (x: number) => x / Number(requestsA);
const perB = (x: number) => x / Number(requestsB);
console.log(`busy µs per request: a ${perA(a.busy).toFixed(1)}, b ${perB(b.busy).toFixed(1)}`);
console.log('     a       b   a − b  function (self µs per request)');
const rows = [...new Set([...a.self.keys(), ...b.self.keys()])].map((name) => {
  const x = perA(a.self.get(name) ?? 0);
  const y = perB(b.self.get(name) ?? 0);
  return { name, x, y };
});
rows.sort((p, q) => Math.abs(q.x - q.y) - Math.abs(p.x - p.y));
for (const { name, x, y } of rows.slice(0, Number(top ?? 30))) {
  console.log(`${x.toFixed(2).padStart(7)} ${y.toFixed(2).padStart(7)} ${(x - y).toFixed(2).padStart(7)}  ${name}`);
}
