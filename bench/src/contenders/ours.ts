import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { BenchMiddleware } from '../server/trpc.ts';
import type { ContenderSpec } from './contender-spec.ts';

/**
 * Ours, loaded lazily so the peers can be benched while the server package is not built yet.
 * `pool: true` hands it the raw `pg` pool (its optional fast path), when the package accepts one.
 */
export async function oursMiddleware(
  spec: ContenderSpec,
  db: Kysely<any>,
  pool: pg.Pool | undefined,
): Promise<BenchMiddleware> {
  // A `-before` contender runs the build in BENCH_BEFORE_DIST (see main.ts).
  const { createIdempotency } = spec.name.endsWith('-before')
    ? await import(`${process.env.BENCH_BEFORE_DIST}/index.js`)
    : await import('@trpc-idempotency/server');
  const options: Record<string, unknown> = {
    db,
    scope: () => 'bench',
    mode: spec.mode ?? 'transaction',
  };
  if (spec.pool) options.pool = pool;
  if (spec.table) options.table = spec.table;
  if (spec.cache === false) options.cache = false;
  const idempotency = (createIdempotency as (o: unknown) => { middleware: unknown })(options);
  return idempotency.middleware as BenchMiddleware;
}
