import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppDB, type Backend, makeApp, openBackend } from './harness.js';

let keySeq = 0;
const newKey = () => `ce-${Date.now().toString(36)}-${++keySeq}`;

const MODES = ['transaction', 'lease'] as const;

/**
 * The completion leaves `expires_at` as the claim set it (`ttl` counts from the claim), so it changes no indexed
 * column and Postgres can update the key row in place (a HOT update: no new entries in the primary key or the
 * expiry index). Only a handler that outlived `ttl` moves it, to a full `ttl` from the completion. That semantic is
 * tested on every dialect in dialects.test.ts ("counts ttl from the claim…", both modes); `suspicions` (c) replays
 * such a result.
 *
 * Postgres only, unlike the other lease and completion suites: a HOT update is Postgres' own storage mechanism
 * (InnoDB updates a row in place in its clustered index, SQLite rewrites its b-tree cell: neither has an index entry
 * per row version to save), and the check reads pg_stat_user_tables, which each of the pool's connections must flush
 * (PGlite's one in-process connection has no pool to reach).
 */
describe.each(['pg-fast', 'pg-general'] as const)('the completion on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
  });
  afterAll(() => backend?.close());

  /** The middleware's own pool, so the test can reach every connection it used. */
  const appDb = () => {
    const pool = new pg.Pool({ connectionString: backend.url, max: 2 });
    pool.on('error', () => {});
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
    return { pool, db, app: { db, pool: name === 'pg-fast' ? pool : undefined } };
  };

  /**
   * Makes every connection of `pool` publish its table statistics. pg_stat_force_next_flush() makes the backend
   * flush them, unthrottled, before it reports ready for the next query: once the call returns they are in
   * shared memory, whatever the machine's load. Each connection is checked out at once, so each gets the call.
   */
  const flushStats = async (pool: pg.Pool) => {
    const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
    try {
      for (const c of clients) await c.query('SELECT pg_stat_force_next_flush()');
    } finally {
      for (const c of clients) c.release();
    }
  };

  const updates = async (table: string) =>
    (
      await backend.query<{ upd: string; hot: string }>(
        `SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables
          WHERE relid = '${table}'::regclass`,
      )
    ).map((r) => ({ upd: Number(r.upd), hot: Number(r.hot) }))[0];

  for (const mode of MODES) {
    it(`${mode} mode: updates the key row in place (HOT) on every completion`, async () => {
      const table = `hot_keys_${mode}`;
      const { pool, db, app } = appDb();
      try {
        const { idempotency, caller } = makeApp(app, { mode, table, cache: false });
        await idempotency.migrate();
        // 10 rows and their completed versions fit in one heap page with room to spare, so every completion can be
        // HOT without pruning; 20 needed a prune whose timing depends on the load (19 of 20 under CI, a flake).
        const N = 10;
        for (let i = 0; i < N; i++) await caller(newKey(), `hot-${mode}`).payments.create({ amount: i });
        await flushStats(pool);
        // Each call wrote its row once more, at completion; none of those writes touched an index.
        expect(await updates(table)).toEqual({ upd: N, hot: N });
      } finally {
        await db.destroy();
      }
    });
  }
});
