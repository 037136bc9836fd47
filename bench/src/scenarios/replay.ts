import { type BenchEnv, rotate, server } from '../bench-env.ts';
import { runTag } from '../contenders/contender-spec.ts';
import { type LoadResult, runLoad, sendKeys } from '../load/http-load.ts';
import { median, type Spread, spread } from '../load/stats.ts';

export interface ReplayRow {
  contender: string;
  rps: number;
  /** req/s per round, in round order (the goals divide contenders round by round). */
  roundRps: number[];
  p50: number;
  p99: number;
  /** Per-round ratio to plain first executions of the light handler (the cheaper floor). */
  ratioLight: Spread;
  /** Per-round ratio to plain first executions of the payment handler. */
  ratioPayment: Spread;
  /** Server process CPU per replay (warm-up included), µs: median over rounds. */
  cpuMicros: number;
  /** The load generator's own CPU per replay (warm-up included), µs: median over rounds. */
  loadCpuMicros: number;
  /** Responses other than 200 (a replay must answer like the original). */
  non200: number;
}

const REPLAY_BODY = '{"accountId":1,"amount":1}';

/**
 * Already-completed keys: each contender first completes `replayKeys` keys, then is loaded with those keys
 * again, cycling; plain runs (fresh, no key) in the same rounds as the reference.
 */
export async function replayScenario(env: BenchEnv): Promise<ReplayRow[]> {
  const { params } = env;
  const replayers = env.contenders.filter((c) => c.kind !== 'plain').map((c) => c.name);
  const keys = new Map<string, string[]>();
  for (const name of replayers) {
    const id = name.replace(/[^A-Za-z0-9-]/g, '_');
    const list = Array.from({ length: params.replayKeys }, (_, i) => `${runTag}-r-${id}-${i}`);
    const ok = await sendKeys(server(env, name).url, 'light', list, params.connections);
    if (ok !== list.length) env.log(`  ${name}: only ${ok}/${list.length} replay keys completed`);
    keys.set(name, list);
  }
  const cells = ['plain|light', 'plain|payment', ...replayers.map((n) => `${n}|replay`)];
  const results = new Map<string, LoadResult[]>();
  const serverCpu = new Map<string, number[]>();
  for (let round = 0; round < params.rounds; round++) {
    for (const cell of rotate(cells, round)) {
      const [name, kind] = cell.split('|') as [string, string];
      const list = keys.get(name);
      // Start each round at another offset so a bounded cache sees the keys in a new order.
      const offset = round * 7919;
      const before = await server(env, name).counters();
      const result = await runLoad({
        url: server(env, name).url,
        path: kind === 'payment' ? 'payment' : 'light',
        connections: params.connections,
        durationMs: params.durationMs,
        warmupMs: params.warmupMs,
        key: list ? (i) => list[(i + offset) % list.length] : (i) => `${runTag}-rp-${round}-${i}`,
        ...(list ? { body: () => REPLAY_BODY } : {}),
      });
      const after = await server(env, name).counters();
      results.set(cell, [...(results.get(cell) ?? []), result]);
      serverCpu.set(cell, [...(serverCpu.get(cell) ?? []), (after.cpuMicros - before.cpuMicros) / result.sent]);
      env.log(
        `  round ${round + 1} ${cell.padEnd(26)} ${result.rps.toFixed(0).padStart(6)} req/s, CPU µs/req server ${Math.round(serverCpu.get(cell)!.at(-1)!)} load ${Math.round(result.loadCpuMicros)}`,
      );
    }
  }
  const plainLight = results.get('plain|light') ?? [];
  const plainPayment = results.get('plain|payment') ?? [];
  return replayers.map((name) => {
    const runs = results.get(`${name}|replay`) ?? [];
    return {
      contender: name,
      rps: median(runs.map((r) => r.rps)),
      roundRps: runs.map((r) => r.rps),
      p50: median(runs.map((r) => r.p50)),
      p99: median(runs.map((r) => r.p99)),
      ratioLight: spread(runs.map((r, i) => r.rps / (plainLight[i]?.rps ?? Number.NaN))),
      ratioPayment: spread(runs.map((r, i) => r.rps / (plainPayment[i]?.rps ?? Number.NaN))),
      cpuMicros: median(serverCpu.get(`${name}|replay`) ?? []),
      loadCpuMicros: median(runs.map((r) => r.loadCpuMicros)),
      non200: runs.reduce((a, r) => a + r.requests - (r.statuses['200'] ?? 0) + r.errors, 0),
    };
  });
}
