import { createMariaDbDatabase, type MariaDbDatabase } from '@trpc-idempotency/test-db';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PgClientLike, PgPoolLike } from '../index.js';
import { makeDialectApp } from './dialect-app.js';
import { type AppDB, type Backend, makeApp, openBackend } from './harness.js';

/**
 * Counts every statement text sent through a pool (one `query` call is one round trip). Like `pg`'s own pool it
 * hands out one object per connection (the fast path keeps what it prepared on a connection by its client object).
 */
function countingPool(pool: pg.Pool) {
  const sent: string[] = [];
  const wrappers = new WeakMap<pg.PoolClient, PgClientLike>();
  const counted: PgPoolLike = {
    connect: async () => {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        wrapper = {
          query: (text: string, values?: readonly unknown[]) => {
            sent.push(text);
            return client.query(text, values as unknown[]) as never;
          },
          release: (error?: Error | boolean) => client.release(error as Error | undefined),
        };
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
  };
  return { pool: counted, sent };
}

/**
 * Round trips are the budget the middleware spends per call (see the README's Performance). The handler of
 * the test app sends one INSERT of its own, included in the counts below.
 */
describe('round trips per call', () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend('pg-general');
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  // `postgres: { pool }` is where the pool goes; the top-level `pool` (deprecated) still means the same.
  for (const where of ['postgres.pool', 'pool'] as const) {
    it(`pg fast path through \`${where}\`: the claim and the completion each one round trip on the pool`, async () => {
      const counting = countingPool(backend.newPool());
      const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: counting.pool as never }) });
      const pool = counting.pool as never;
      const app = makeApp({ db, pool: undefined }, where === 'pool' ? { pool } : { postgres: { pool } });
      await app.caller(`rt-where-${where}`, 'rt').payments.create({ amount: 1 });
      // Preparing (once per connection), the claim batch, the handler's INSERT and the completion batch.
      expect(counting.sent).toHaveLength(4);
      expect(counting.sent[1]).toMatch(/^BEGIN[^;]*;\nEXECUTE trpc_idempotency_lift_/);
      expect(counting.sent[3]).toMatch(/;\nCOMMIT$/);
    });
  }

  it('pg fast path, transaction mode: 2 of ours on a first execution, 0 on a cached replay', async () => {
    const raw = backend.newPool();
    raw.options.max = 1; // one connection, so the second call finds what the first prepared
    const counting = countingPool(raw);
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: counting.pool as never }) });
    const app = makeApp({ db, pool: counting.pool as never });
    await app.caller('rt-fast-0', 'rt').payments.create({ amount: 1 });
    // A new connection first gets the completion, the claim and the statement that lifts statement_timeout for it
    // prepared, in that order, in a round trip of its own, once.
    expect(counting.sent).toHaveLength(4);
    expect(counting.sent[0]).toMatch(
      new RegExp(
        [
          String.raw`^PREPARE trpc_idempotency_complete_\w+ \(text, text, text, float8\) AS `,
          String.raw`UPDATE [^;]*;\n`,
          String.raw`PREPARE trpc_idempotency_claim_\w+ \(text, text, text, text, float8, int\) AS INSERT [^;]*;\n`,
          String.raw`PREPARE trpc_idempotency_lift_\w+ \(text\) AS SELECT set_config\('statement_timeout'[^;]*$`,
        ].join(''),
      ),
    );
    counting.sent.length = 0;
    await app.caller('rt-fast', 'rt').payments.create({ amount: 1 });
    expect(counting.sent).toHaveLength(3); // claim batch, the handler's INSERT, completion batch
    // The app's statement_timeout is lifted for the claim (put back by its RETURNING): only `wait` bounds it.
    expect(counting.sent[0]).toMatch(
      new RegExp(
        String.raw`^BEGIN[^;]*;\nEXECUTE trpc_idempotency_lift_\w+\('0'\);\n` +
          String.raw`EXECUTE trpc_idempotency_claim_\w+\(E'user:rt', E'rt-fast', `,
      ),
    );
    // The completion, prepared with the claim (its check, that it updated this transaction's claim, is inside).
    expect(counting.sent[2]).toMatch(
      /^RELEASE SAVEPOINT \w+;\nEXECUTE trpc_idempotency_complete_\w+\(E'user:rt', E'rt-fast', E'[^;]*\);\nCOMMIT$/,
    );
    counting.sent.length = 0;
    await app.caller('rt-fast', 'rt').payments.create({ amount: 1 });
    expect(counting.sent).toHaveLength(0);
    const uncached = makeApp({ db, pool: counting.pool as never }, { cache: false });
    await uncached.caller('rt-fast', 'rt').payments.create({ amount: 1 });
    // The claim batch (its insert finds the key taken), then the read of the done row with the ROLLBACK.
    expect(counting.sent).toHaveLength(2);
    expect(counting.sent[1]).toMatch(/^SELECT[\s\S]*ROLLBACK$/);
  });

  it('pg fast path, lease mode: 2 of ours (claim + BEGIN, completion + COMMIT)', async () => {
    const counting = countingPool(backend.newPool());
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: counting.pool as never }) });
    const app = makeApp({ db, pool: counting.pool as never }, { mode: 'lease' });
    await app.caller('rt-lease', 'rt').payments.create({ amount: 1 });
    expect(counting.sent).toHaveLength(3); // claim committed + BEGIN, the handler's INSERT, completion + COMMIT
    counting.sent.length = 0;
    const uncached = makeApp({ db, pool: counting.pool as never }, { mode: 'lease', cache: false });
    await uncached.caller('rt-lease', 'rt').payments.create({ amount: 1 });
    // The claim (+ BEGIN) finds the key taken; that transaction reads the done row and rolls back.
    expect(counting.sent).toHaveLength(2);
    expect(counting.sent[1]).toMatch(/^SELECT[\s\S]*ROLLBACK$/);
  });

  // Claim + BEGIN, completion + COMMIT.
  it('general path (Kysely only) on node-postgres, transaction mode: 2 of ours', async () => {
    const sent: string[] = [];
    const pool = backend.newPool();
    pool.options.max = 1; // one connection: the second call finds what the first prepared on it
    const db = new Kysely<AppDB>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        sent.push(event.query.sql); // a failed query is logged too (level 'error')
      },
    });
    const app = makeApp({ db, pool: undefined });
    await app.caller('rt-general-warm', 'rt').payments.create({ amount: 1 }); // detects the dialect once
    // The completion and the claim are prepared on a connection once, in a round trip of its own.
    expect(sent.filter((s) => s.startsWith('PREPARE trpc_idempotency_complete_'))).toHaveLength(1);
    sent.length = 0;
    await app.caller('rt-general', 'rt').payments.create({ amount: 1 });
    // Texts, one round trip each: BEGIN + claim + savepoint + check, the handler's INSERT, completion + COMMIT.
    expect(sent).toHaveLength(3);
    expect(sent[0]).toMatch(/^BEGIN[\s\S]*EXECUTE trpc_idempotency_claim_[\s\S]*SAVEPOINT[\s\S]*SELECT 1 \/ count/);
    expect(sent[1]).toMatch(/^insert into "payments"/);
    expect(sent[2]).toMatch(/^RELEASE SAVEPOINT[^;]*;\nEXECUTE trpc_idempotency_complete_[^;]*;\nCOMMIT$/);
    sent.length = 0;
    const uncached = makeApp({ db, pool: undefined }, { cache: false });
    await uncached.caller('rt-general', 'rt').payments.create({ amount: 1 });
    // After the new instance's two detection queries: the claim's check fails inside the savepoint, then the claim's
    // transaction reads the done row and rolls back.
    expect(sent.map((s) => s.split(/\s/)[0]!.toUpperCase())).toEqual([
      'SELECT',
      'SELECT',
      'BEGIN',
      'ROLLBACK',
      'SELECT',
      'ROLLBACK',
    ]);
    await db.destroy();
  });
});

/**
 * MariaDB: one statement is one round trip (mysql2 sends no batches), counted with Kysely's query log as the README's
 * "Round trips of ours on MariaDB" are. Each statement is named by its first words; the handler's INSERT is included.
 */
describe('round trips per call on MariaDB', () => {
  let m: MariaDbDatabase;
  beforeAll(async () => {
    m = await createMariaDbDatabase({ max: 2 });
    await sql`CREATE TABLE payments (
      id INT AUTO_INCREMENT PRIMARY KEY, user_id TEXT NOT NULL, amount INT NOT NULL, note TEXT
    )`.execute(m.db);
    await makeDialectApp({ db: m.db as Kysely<AppDB> }).idempotency.migrate();
  });
  afterAll(() => m?.drop());

  /** The statements one call sends, after a first call of its instance (which learns the server once). */
  async function statementsOf(
    mode: 'transaction' | 'lease',
    key: string,
    opts: { cache?: false } = {},
  ): Promise<string[]> {
    const sent: string[] = [];
    const db = new Kysely<AppDB>({
      dialect: m.dialect({ max: 2 }),
      log: (e) => {
        sent.push(e.query.sql);
      },
    });
    try {
      const app = makeDialectApp({ db }, { mode, ...opts });
      await app.caller(`${key}-warm`, 'rt').payments.create({ amount: 1 });
      sent.length = 0;
      await app.caller(key, 'rt').payments.create({ amount: 1 });
      return sent.map((text) => {
        const words = text.replace(/^SET STATEMENT .*? FOR /s, '').split(/\s+/);
        return (words[0] === 'SELECT' ? `SELECT ${words[1]?.split(/[(,]/)[0]}` : words[0]!).toUpperCase();
      });
    } finally {
      await db.destroy();
    }
  }

  // The claim holds the key lock: no lock check, no ownership read.
  it('lease mode: 5 of ours on a first execution', async () => {
    expect(await statementsOf('lease', 'rt-lease')).toEqual([
      'INSERT', // the claim, with its GET_LOCK
      'START', // at the app's isolation level: no SET TRANSACTION
      'INSERT', // the handler's
      'UPDATE', // the result, fenced by the token
      'COMMIT',
      'SELECT RELEASE_LOCK',
    ]);
    // A replay from the database: the claim finds the key taken, the read (autocommit, no ROLLBACK), the lock freed.
    expect(await statementsOf('lease', 'rt-lease', { cache: false })).toEqual([
      'INSERT',
      'SELECT T.STATUS',
      'SELECT RELEASE_LOCK',
    ]);
  });

  it('transaction mode: 5 of ours on a first execution, 4 on a replay from the database', async () => {
    expect(await statementsOf('transaction', 'rt-tx')).toEqual([
      'START', // at the app's isolation level: no SET TRANSACTION
      'INSERT', // the claim
      'SAVEPOINT',
      'INSERT', // the handler's
      'UPDATE',
      'COMMIT',
    ]);
    expect(await statementsOf('transaction', 'rt-tx', { cache: false })).toEqual([
      'START',
      'INSERT',
      'SELECT T.STATUS', // the first consistent read of its transaction: a snapshot taken after the claim
      'ROLLBACK',
    ]);
  });
});
