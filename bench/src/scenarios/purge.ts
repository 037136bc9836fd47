import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import type { BenchEnv } from '../bench-env.ts';
import { type ContenderSpec, runTag } from '../contenders/contender-spec.ts';
import { migrateOurs, supportsPoolOption } from '../contenders/ours-setup.ts';
import { type LoadResult, runLoad } from '../load/http-load.ts';
import { spawnServer } from '../server/spawn-server.ts';
import { fillTable } from './fill-table.ts';

export interface PurgeResult {
  expiredRows: number;
  loadSeconds: number;
  removed: number;
  purgeSeconds: number;
  before: Pick<LoadResult, 'rps' | 'p50' | 'p99'>;
  during: Pick<LoadResult, 'rps' | 'p50' | 'p99'>;
  /** Non-200 responses while the purge ran. */
  duringNon200: number;
}

const TABLE = 'idem_purge';

/**
 * `purgeExpired()` deleting `purgeRows` expired rows from the table live traffic claims keys in (ours,
 * transaction mode, light handler): the purge's duration, and the traffic's p99 during it versus before.
 */
export async function purgeScenario(env: BenchEnv): Promise<PurgeResult> {
  const { params } = env;
  await migrateOurs(env.db, TABLE);
  const loadMs = await fillTable(env.db, TABLE, params.purgeRows, true);
  env.log(`  loaded ${params.purgeRows} expired rows in ${(loadMs / 1000).toFixed(1)} s`);
  const spec: ContenderSpec = {
    name: 'ours-purge',
    kind: 'ours',
    mode: 'transaction',
    pool: await supportsPoolOption(),
    table: TABLE,
  };
  const s = await spawnServer({ spec, databaseUrl: env.databaseUrl, redisUrl: env.redisUrl, poolMax: 16 });
  try {
    const traffic = (phase: string, extra: { durationMs: number; stopWhen?: () => boolean }) =>
      runLoad({
        url: s.url,
        path: 'light',
        connections: params.connections,
        warmupMs: phase === 'before' ? params.warmupMs : 0,
        key: (i) => `${runTag}-pg-${phase}-${i}`,
        ...extra,
      });
    const before = await traffic('before', { durationMs: Math.max(3000, params.durationMs) });
    const { createIdempotency } = await import('@trpc-idempotency/server');
    const idempotency = (createIdempotency as (o: unknown) => { purgeExpired(): Promise<number> })({
      db: env.db,
      scope: () => 'bench',
      table: TABLE,
    });
    let done = false;
    const started = performance.now();
    const purge = idempotency.purgeExpired().finally(() => {
      done = true;
    });
    const during = await traffic('during', { durationMs: 600_000, stopWhen: () => done });
    const removed = await purge;
    const purgeSeconds = (performance.now() - started) / 1000;
    env.log(
      `  purge removed ${removed} rows in ${purgeSeconds.toFixed(1)} s; traffic p99 ${before.p99.toFixed(1)} ms before, ${during.p99.toFixed(1)} ms during`,
    );
    const pick = (r: LoadResult) => ({ rps: r.rps, p50: r.p50, p99: r.p99 });
    return {
      expiredRows: params.purgeRows,
      loadSeconds: loadMs / 1000,
      removed,
      purgeSeconds,
      before: pick(before),
      during: pick(during),
      duringNon200: during.requests - (during.statuses['200'] ?? 0) + during.errors,
    };
  } finally {
    await s.stop();
    await sql`DROP TABLE IF EXISTS ${sql.table(TABLE)}`.execute(env.db);
  }
}
