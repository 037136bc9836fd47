import { type EmbeddedPostgres, startEmbeddedPostgres } from '@trpc-idempotency/test-db';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectReason } from './expectations.js';
import { type AppDB, makeApp, openBackend, sleep } from './harness.js';

/** A Postgres of this file's own, so stopping it disturbs no other test. */
describe('the database stopped at the claim', () => {
  let server: EmbeddedPostgres;
  let pool: pg.Pool;
  let db: Kysely<AppDB>;
  beforeAll(async () => {
    server = await startEmbeddedPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 4, connectionTimeoutMillis: 2000 });
    pool.on('error', () => {}); // idle clients die with the server; the pool must not crash the process
    db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
    await pool.query(
      'CREATE TABLE payments (id serial PRIMARY KEY, user_id text NOT NULL, amount int NOT NULL, note text)',
    );
  }, 120_000);
  afterAll(async () => {
    await db?.destroy().catch(() => {});
    await server?.stop();
  });

  for (const path of ['pg-fast', 'pg-general'] as const) {
    it(`answers 503 store_unavailable without running the handler, and recovers when back (${path})`, async () => {
      const app = makeApp({ db, pool: path === 'pg-fast' ? pool : undefined });
      await app.idempotency.migrate();
      await app.caller(`${path}-before`, path).payments.create({ amount: 1 });

      await server.pause();
      const error = await expectReason(
        app.caller(`${path}-during`, path).payments.create({ amount: 2 }),
        'store_unavailable',
        'SERVICE_UNAVAILABLE',
      );
      expect((error.cause as { retryAfterMs?: number }).retryAfterMs).toBeGreaterThan(0);
      expect(app.control.runs).toBe(1);

      await server.start();
      // The pool may still hand out a client that died with the old server: that attempt is a 503 too, and the
      // pool drops it. A client retries 503s, so recovery means "succeeds within a few retries, no restart".
      let result: unknown;
      for (let attempt = 0; attempt < 5 && result === undefined; attempt++) {
        result = await app
          .caller(`${path}-during`, path)
          .payments.create({ amount: 2 })
          .catch(() => undefined);
        if (result === undefined) await sleep(200);
      }
      expect(result).toMatchObject({ amount: 2 });
      expect(app.control.runs).toBe(2);
      const rows = await pool.query(`SELECT amount FROM payments WHERE user_id = '${path}' ORDER BY id`);
      expect(rows.rows.map((r) => r.amount)).toEqual([1, 2]);
    }, 120_000);
  }
});

describe('connections terminated during calls', () => {
  it('keeps the process alive on the pg fast path and stays exactly-once while backends are killed', async () => {
    const backend = await openBackend('pg-fast');
    const tag = `kill-${process.pid}`;
    const pool = new pg.Pool({ connectionString: backend.url, max: 4, application_name: tag });
    pool.on('error', () => {});
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
    const admin = new pg.Client({ connectionString: backend.url });
    await admin.connect();
    try {
      const app = makeApp({ db, pool });
      await app.idempotency.migrate();
      app.control.delayMs = 20; // an open transaction across non-database work, as in a real handler
      const killer = setInterval(() => {
        admin
          .query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${tag}'`)
          .catch(() => {});
      }, 60);
      const keys: string[] = [];
      const end = Date.now() + 2500;
      await Promise.all(
        Array.from({ length: 6 }, async (_, worker) => {
          for (let i = 0; Date.now() < end; i++) {
            const key = `kill-${worker}-${i}`;
            keys.push(key);
            // A client retries with the same key until it gets an answer.
            for (let attempt = 0; attempt < 50; attempt++) {
              const ok = await app
                .caller(key, key)
                .payments.create({ amount: 1 })
                .then(
                  () => true,
                  () => false,
                );
              if (ok) break;
            }
          }
        }),
      );
      clearInterval(killer);
      const counts = await backend.query<{ user_id: string; n: string }>(
        'SELECT user_id, count(*) AS n FROM payments GROUP BY user_id HAVING count(*) > 1',
      );
      expect(counts).toEqual([]);
      expect(keys.length).toBeGreaterThan(6);
    } finally {
      await admin.end();
      await db.destroy();
      await backend.close();
    }
  }, 60_000);
});

describe('the database unreachable from the very first call (general path)', () => {
  it('answers 503 store_unavailable even before the dialect is known', async () => {
    const pool = new pg.Pool({
      connectionString: 'postgres://postgres@127.0.0.1:1/none',
      connectionTimeoutMillis: 1000,
    });
    pool.on('error', () => {});
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
    try {
      for (const mode of ['transaction', 'lease'] as const) {
        const app = makeApp({ db, pool: undefined }, { mode });
        await expectReason(app.caller(`first-${mode}`).payments.create({ amount: 1 }), 'store_unavailable');
        expect(app.control.runs).toBe(0);
      }
    } finally {
      await db.destroy();
    }
  });
});
