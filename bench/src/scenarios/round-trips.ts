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
  /** Server process CPU per request, µs: less sensitive to a shared machine than throughput. */
  cpuLight: number;
  cpuPayment: number;
  cpuReplay: number;
}

const CONNECTIONS = 4;

/**
 * Counts round trips and CPU per request on the server side: N requests (4 at a time), counter deltas ÷ N.
 * The replay pass sends the light keys again, after they completed.
 */
export async function roundTripScenario(env: BenchEnv): Promise<RoundTripRow[]> {
  const rows: RoundTripRow[] = [];
  const N = env.params.quick ? 100 : 200;
  for (const spec of env.contenders) {
    const s = server(env, spec.name);
    const measure = async (path: string, keys: string[]) => {
      const before = await s.counters();
      await sendKeys(s.url, path, keys, CONNECTIONS);
      const after = await s.counters();
      const per = (a: number, b: number) => (a - b) / keys.length;
      return {
        sql: per(after.queries, before.queries),
        redis: per(after.redis, before.redis),
        cpu: per(after.cpuMicros, before.cpuMicros),
      };
    };
    const id = spec.name.replace(/[^A-Za-z0-9-]/g, '_');
    const lightKeys = Array.from({ length: N }, (_, i) => `${runTag}-rt-${id}-l${i}`);
    // Untimed warm-up so JIT compilation does not count against the first contender measured.
    await sendKeys(
      s.url,
      'light',
      Array.from({ length: N / 2 }, (_, i) => `${runTag}-rtw-${id}-${i}`),
      CONNECTIONS,
    );
    const light = await measure('light', lightKeys);
    const payment = await measure(
      'payment',
      Array.from({ length: N }, (_, i) => `${runTag}-rt-${id}-p${i}`),
    );
    const none = { sql: Number.NaN, redis: Number.NaN, cpu: Number.NaN };
    const replay = spec.kind === 'plain' ? none : await measure('light', lightKeys);
    rows.push({
      contender: spec.name,
      sqlLight: light.sql,
      sqlPayment: payment.sql,
      sqlReplay: replay.sql,
      redisLight: light.redis,
      redisPayment: payment.redis,
      redisReplay: replay.redis,
      cpuLight: light.cpu,
      cpuPayment: payment.cpu,
      cpuReplay: replay.cpu,
    });
    env.log(
      `  ${spec.name.padEnd(22)} sql ${light.sql.toFixed(2)}/${payment.sql.toFixed(2)}/${replay.sql.toFixed(2)}  redis ${light.redis.toFixed(2)}/${replay.redis.toFixed(2)}  cpu µs ${light.cpu.toFixed(0)}/${payment.cpu.toFixed(0)}/${replay.cpu.toFixed(0)}`,
    );
  }
  return rows;
}
