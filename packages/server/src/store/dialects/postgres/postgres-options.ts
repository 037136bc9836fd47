import type { PgPoolLike } from './pg-pool-like.js';

/** Options only the Postgres dialect takes: `createIdempotency({ …, postgres: { pool } })`. */
export interface PostgresOptions {
  /**
   * The raw `pg` `Pool` behind `db` (the same database). Enables the fast path: the claim and the completion each
   * travel as one multi-statement round trip. Without it everything works through Kysely, with more round trips.
   */
  pool?: PgPoolLike;
}
