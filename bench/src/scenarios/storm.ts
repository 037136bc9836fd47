import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { Pool } from 'undici';
import { type BenchEnv, server } from '../bench-env.ts';
import { runTag } from '../contenders/contender-spec.ts';

export interface StormRow {
  contender: string;
  requests: number;
  /** Handler executions, counted as payment rows carrying the key. */
  executions: number;
  statuses: Record<string, number>;
  /** Until the last response arrived. */
  allAnsweredMs: number;
}

/** 1,000 requests with one key, all sent at once on their own connections, to the payment handler. */
export async function stormScenario(env: BenchEnv): Promise<StormRow[]> {
  const rows: StormRow[] = [];
  const count = env.params.stormRequests;
  for (const spec of env.contenders.filter((c) => c.kind !== 'plain' && !c.replayOnly)) {
    const key = `${runTag}-storm-${spec.name}`;
    const pool = new Pool(server(env, spec.name).url, { connections: count, pipelining: 1 });
    const statuses: Record<string, number> = {};
    const started = performance.now();
    await Promise.all(
      Array.from({ length: count }, async () => {
        try {
          const res = await pool.request({
            path: '/payment',
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': key },
            body: '{"accountId":7,"amount":1}',
          });
          await res.body.dump();
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        } catch (error) {
          const code = (error as { code?: string }).code ?? 'error';
          statuses[code] = (statuses[code] ?? 0) + 1;
        }
      }),
    );
    const allAnsweredMs = performance.now() - started;
    await pool.close();
    const { rows: counted } = await sql<{ n: string }>`SELECT count(*) AS n FROM payments WHERE ref = ${key}`.execute(
      env.db,
    );
    const executions = Number(counted[0]?.n ?? 0);
    rows.push({ contender: spec.name, requests: count, executions, statuses, allAnsweredMs });
    env.log(
      `  ${spec.name.padEnd(18)} executions=${executions} statuses=${JSON.stringify(statuses)} ${allAnsweredMs.toFixed(0)} ms`,
    );
  }
  return rows;
}
