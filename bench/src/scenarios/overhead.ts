import { type BenchEnv, rotate, server } from '../bench-env.ts';
import { runTag } from '../contenders/contender-spec.ts';
import { type LoadResult, runLoad } from '../load/http-load.ts';
import { postgresCpuMicros } from '../load/postgres-cpu.ts';
import { median, round2, type Spread, spread } from '../load/stats.ts';

export type HandlerName = 'light' | 'payment';

/** One contender on one handler, over all rounds. */
export interface OverheadRow {
  contender: string;
  handler: HandlerName;
  rounds: LoadResult[];
  rps: number;
  p50: number;
  p99: number;
  /** Per-round throughput ratio to `plain` in the same round. */
  ratio: Spread;
  /** Server process CPU per request under this load (warm-up included), µs: median over rounds. */
  cpuMicros: number;
  /** The load generator's own CPU per request (warm-up included), µs: median over rounds. */
  loadCpuMicros: number;
  /** SQL round trips per request under this load. */
  sqlPerRequest: number;
  /** Local Postgres CPU per request (all backends), µs; NaN when Postgres is not a local process. */
  pgCpuMicros: number;
  non200: number;
}

/**
 * First executions with unique keys: every contender on both handlers, in rotated order per round;
 * the ratio to `plain` is taken inside each round (so machine noise hits both sides), then the median.
 */
export async function overheadScenario(env: BenchEnv): Promise<OverheadRow[]> {
  const { params } = env;
  const names = env.contenders.filter((c) => !c.replayOnly).map((c) => c.name);
  const handlers: HandlerName[] = ['light', 'payment'];
  const results = new Map<string, LoadResult[]>();
  const costs = new Map<string, { cpu: number; sql: number; pg: number }[]>();
  let seq = 0;
  for (let round = 0; round < params.rounds; round++) {
    for (const handler of handlers) {
      for (const name of rotate(names, round)) {
        const prefix = `${runTag}-o-${seq++}-`;
        const before = await server(env, name).counters();
        const pgBefore = postgresCpuMicros() ?? Number.NaN;
        const result = await runLoad({
          url: server(env, name).url,
          path: handler,
          connections: params.connections,
          durationMs: params.durationMs,
          warmupMs: params.warmupMs,
          key: (i) => `${prefix}${i}`,
        });
        const after = await server(env, name).counters();
        const pgAfter = postgresCpuMicros() ?? Number.NaN;
        const id = `${name}|${handler}`;
        results.set(id, [...(results.get(id) ?? []), result]);
        const cost = {
          cpu: (after.cpuMicros - before.cpuMicros) / result.sent,
          sql: (after.queries - before.queries) / result.sent,
          pg: (pgAfter - pgBefore) / result.sent,
        };
        costs.set(id, [...(costs.get(id) ?? []), cost]);
        env.log(
          `  round ${round + 1} ${handler.padEnd(7)} ${name.padEnd(18)} ${result.rps.toFixed(0).padStart(6)} req/s, CPU µs/req server ${Math.round(cost.cpu)} load ${Math.round(result.loadCpuMicros)}`,
        );
      }
    }
  }
  const rows: OverheadRow[] = [];
  for (const handler of handlers) {
    const plain = results.get(`plain|${handler}`) ?? [];
    for (const name of names) {
      const runs = results.get(`${name}|${handler}`) ?? [];
      rows.push({
        contender: name,
        handler,
        rounds: runs,
        rps: median(runs.map((r) => r.rps)),
        p50: median(runs.map((r) => r.p50)),
        p99: median(runs.map((r) => r.p99)),
        ratio: spread(runs.map((r, i) => r.rps / (plain[i]?.rps ?? Number.NaN))),
        cpuMicros: median((costs.get(`${name}|${handler}`) ?? []).map((c) => c.cpu)),
        sqlPerRequest: median((costs.get(`${name}|${handler}`) ?? []).map((c) => c.sql)),
        pgCpuMicros: median((costs.get(`${name}|${handler}`) ?? []).map((c) => c.pg)),
        loadCpuMicros: median(runs.map((r) => r.loadCpuMicros)),
        non200: runs.reduce((a, r) => a + r.requests - (r.statuses['200'] ?? 0) + r.errors, 0),
      });
    }
  }
  return rows;
}

export function formatRatio(s: Spread): string {
  return `${round2(s.median).toFixed(2)}× (${round2(s.min).toFixed(2)}–${round2(s.max).toFixed(2)})`;
}
