import { type BenchEnv, server } from '../bench-env.ts';
import { runTag } from '../contenders/contender-spec.ts';
import { sendKeys } from '../load/http-load.ts';

export interface RoundTripRow {
  contender: string;
  /** SQL statements sent to Postgres per request (each pg `Client.query` is one round trip). */
  sqlLight: number;
  sqlPayment: number;
  sqlReplay: number;
  /** Redis commands per request. */
  redisLight: number;
  redisPayment: number;
  redisReplay: number;
}

const N = 200;

/** Counts round trips per request on the server side: N sequential requests, counter deltas divided by N. */
export async function roundTripScenario(env: BenchEnv): Promise<RoundTripRow[]> {
  const rows: RoundTripRow[] = [];
  for (const spec of env.contenders) {
    const s = server(env, spec.name);
    const measure = async (path: string, keys: string[]) => {
      const before = await s.counters();
      await sendKeys(s.url, path, keys, 1);
      const after = await s.counters();
      return { sql: (after.queries - before.queries) / keys.length, redis: (after.redis - before.redis) / keys.length };
    };
    const lightKeys = Array.from({ length: N }, (_, i) => `${runTag}-rt-${spec.name}-l${i}`);
    const light = await measure('light', lightKeys);
    const payment = await measure(
      'payment',
      Array.from({ length: N }, (_, i) => `${runTag}-rt-${spec.name}-p${i}`),
    );
    const replay = spec.kind === 'plain' ? { sql: Number.NaN, redis: Number.NaN } : await measure('light', lightKeys);
    rows.push({
      contender: spec.name,
      sqlLight: light.sql,
      sqlPayment: payment.sql,
      sqlReplay: replay.sql,
      redisLight: light.redis,
      redisPayment: payment.redis,
      redisReplay: replay.redis,
    });
    env.log(
      `  ${spec.name.padEnd(18)} sql light=${light.sql.toFixed(2)} payment=${payment.sql.toFixed(2)} replay=${replay.sql.toFixed(2)}  redis light=${light.redis.toFixed(2)} replay=${replay.redis.toFixed(2)}`,
    );
  }
  return rows;
}
