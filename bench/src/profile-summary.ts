/**
 * `tsx src/profile-summary.ts <file.cpuprofile> [top]`: self time by function and by package, to see where a
 * contender's server spends its CPU (run the bench with BENCH_CPU_PROF=<dir> to get one profile per server).
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: tsx src/profile-summary.ts <file.cpuprofile> [top]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[] };
const total = profile.samples.length;
const byFunction = new Map<string, number>();
const byPackage = new Map<string, number>();
for (const node of profile.nodes) {
  const hits = node.hitCount ?? 0;
  if (!hits) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(packages|bench)\//, '$1/');
  const pkg = /^(@[^/]+\/[^/]+|[^/]+)/.exec(where)?.[1] ?? '(native)';
  const fn = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + hits);
  byPackage.set(url ? pkg : functionName, (byPackage.get(url ? pkg : functionName) ?? 0) + hits);
}
const print = (title: string, map: Map<string, number>, top: number) => {
  console.log(`\n${title}`);
  for (const [name, hits] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((hits / total) * 100).toFixed(1).padStart(5)}%  ${name}`);
  }
};
print('self time by package', byPackage, 15);
print('self time by function', byFunction, Number(topArg ?? 25));
