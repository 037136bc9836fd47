import { initTRPC } from '@trpc/server';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, idempotencyErrorFormatter, type PgClientLike, type PgPoolLike } from '../index.js';
import { type AppDB, type Backend, type Ctx, makeApp, openBackend } from './harness.js';

/**
 * On node-postgres the claim is prepared once per connection (see
 * store/dialects/postgres/postgres-prepared-statements.ts). What must hold whatever happens to that statement: every
 * call runs its handler once, and a connection that lost it (DISCARD ALL, DEALLOCATE, a pooler) or holds something else
 * under its name costs a retry, never a wrong or lost answer.
 */
describe.each(['pg-fast', 'pg-general'] as const)('%s: prepared claim', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  /**
   * A pool of one connection, so the test can look at (and break) the connection the middleware uses; `pool` is
   * what the app passes to createIdempotency (the general path passes none).
   */
  function onePool() {
    const raw = backend.newPool();
    raw.options.max = 1;
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: raw }) });
    return { raw, db, pool: name === 'pg-fast' ? raw : undefined };
  }
  const ours = async (pool: pg.Pool) =>
    (await pool.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')).rows
      .map((r) => r.name)
      .filter((name) => name.startsWith('trpc_idempotency_'));
  const paymentsOf = async (userId: string) =>
    Number(
      (await backend.query<{ n: string }>(`SELECT count(*) AS n FROM payments WHERE user_id = '${userId}'`))[0]?.n,
    );

  it('prepares the claim and the completion once per connection', async () => {
    const { raw, db, pool } = onePool();
    const app = makeApp({ db, pool });
    expect(await ours(raw)).toEqual([]);
    const first = await app.caller('prep-1', 'prep').payments.create({ amount: 1 });
    const names = await ours(raw);
    expect(names.map((n) => n.replace(/_[0-9a-f]{16}$/, ''))).toEqual([
      'trpc_idempotency_claim',
      'trpc_idempotency_complete',
      'trpc_idempotency_lift',
    ]);
    for (let i = 2; i <= 5; i++) await app.caller(`prep-${i}`, 'prep').payments.create({ amount: i });
    expect(await ours(raw)).toEqual(names);
    expect(app.control.runs).toBe(5);
    // A replay from the table (no cache) answers what the prepared completion stored.
    const uncached = makeApp({ db, pool }, { cache: false });
    expect(await uncached.caller('prep-1', 'prep').payments.create({ amount: 1 })).toEqual(first);
    expect(uncached.control.runs).toBe(0);
  });

  it('a connection that lost them between calls (DISCARD ALL) claims with plain texts: one run per key', async () => {
    const { raw, db, pool } = onePool();
    const app = makeApp({ db, pool });
    const a = await app.caller('discard-a', 'discard').payments.create({ amount: 1 });
    // The completion, the claim, and the statement that lifts statement_timeout.
    expect(await ours(raw)).toHaveLength(3);
    await raw.query('DISCARD ALL'); // the same (only) connection: what a pooler's reset query does
    const b = await app.caller('discard-b', 'discard').payments.create({ amount: 2 });
    const c = await app.caller('discard-c', 'discard').payments.create({ amount: 3 });
    expect(app.control.runs).toBe(3);
    expect(await paymentsOf('discard')).toBe(3);
    // From then on the instance sends plain texts: nothing is prepared again.
    expect(await ours(raw)).toEqual([]);
    const uncached = makeApp({ db, pool }, { cache: false });
    expect(await uncached.caller('discard-a', 'discard').payments.create({ amount: 1 })).toEqual(a);
    expect(await uncached.caller('discard-b', 'discard').payments.create({ amount: 2 })).toEqual(b);
    expect(await uncached.caller('discard-c', 'discard').payments.create({ amount: 3 })).toEqual(c);
    expect(uncached.control.runs + app.control.runs).toBe(3);
  });

  /** The claim's statement name for the default table, read off a connection it was prepared on. */
  async function claimName(): Promise<string> {
    const { raw, db, pool } = onePool();
    await makeApp({ db, pool }).caller('names-probe', 'names').payments.create({ amount: 1 });
    return (await ours(raw)).find((n) => n.startsWith('trpc_idempotency_claim_')) ?? '';
  }

  /**
   * An app on a one-connection pool whose `pay` mutation counts its runs and then runs `body` on the handler's
   * transaction; called with the key as the `idempotency-key` header.
   */
  function payApp(userId: string, body: (db: Kysely<AppDB>, key: string) => Promise<unknown>) {
    const { db, pool } = onePool();
    const t = initTRPC.context<Ctx>().create({ errorFormatter: idempotencyErrorFormatter });
    const counted = { runs: 0 };
    const idempotency = createIdempotency({ db, pool, scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}` });
    const router = t.router({
      pay: t.procedure.use(idempotency.middleware).mutation(async ({ ctx }) => {
        const run = ++counted.runs;
        await body(ctx.idempotency.db, ctx.idempotency.key);
        return { run };
      }),
    });
    const call = (key: string) => router.createCaller({ userId, headers: { 'idempotency-key': key } }).pay();
    return { call, counted };
  }

  it("a statement of ours' name that is not ours is never run as the claim", async () => {
    const claim = await claimName();
    await backend.query('CREATE TABLE IF NOT EXISTS squatter_hits (at timestamptz DEFAULT now())');
    const { raw, db, pool } = onePool(); // no connection opened yet
    // Another statement holds the claim's name before the middleware first uses the connection; it answers as if it
    // had claimed the key (a row with expires_ms) without writing one.
    raw.on('connect', (client) => {
      void client
        .query(
          `PREPARE ${claim} (text, text, text, text, float8, int) AS INSERT INTO squatter_hits DEFAULT VALUES
           RETURNING 1e15::float8 AS expires_ms, 'x'::text AS lock_timeout_restored`,
        )
        .catch(() => {});
    });
    const app = makeApp({ db, pool }, { cache: false });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await app.caller('squat-1', 'squat').payments.create({ amount: 1 }));
    expect(app.control.runs).toBe(1);
    expect(await paymentsOf('squat')).toBe(1);
    expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1);
    expect(await backend.query('SELECT 1 FROM squatter_hits')).toEqual([]);
  });

  // Found by the second outside review of the prepared claim (issue 15): nothing checked that the completion updated
  // the claimed row, so a lying claim let one key commit three times on the fast path, each answered as a success.
  // Code that swaps a statement of ours on the middleware's own connections is the app's (docs/reliability.md, "Trust
  // boundary"): nothing on the hot path stops its work from committing, but the completion's row count makes every
  // such call loud. On the general path the joined claim's check answers 409.
  it('a claim that lies (a statement prepared under its name after ours) never answers without a result', async () => {
    const claim = await claimName();
    const { raw, db, pool } = onePool();
    const app = makeApp({ db, pool }, { cache: false, wait: 300 });
    await app.caller('liar-warm', 'liar').payments.create({ amount: 1 }); // ours is prepared on the one connection
    // Code on the same connection swaps ours for a statement that answers as if it had claimed, writing no row.
    await raw.query(`DEALLOCATE ${claim}`);
    await raw.query(`PREPARE ${claim} (text, text, text, text, float8, int) AS
      SELECT (extract(epoch from clock_timestamp() + interval '1 day') * 1000)::float8 AS expires_ms,
        '0'::text AS lock_timeout_restored`);
    const settled = [];
    for (let i = 0; i < 3; i++)
      settled.push(
        await app
          .caller('liar-1', 'liar')
          .payments.create({ amount: 5 })
          .catch((e) => e),
      );
    // No call answers success: on the fast path each says why, and the key holds that error for its retries.
    const fast = name === 'pg-fast';
    expect(settled.map((r) => (r instanceof Error ? r.message : 'success'))).toEqual(
      Array(3).fill(expect.stringMatching(fast ? /replaced the middleware's prepared claim/ : /still in progress/)),
    );
    const stored = await backend.query<{ status: string }>(`SELECT status FROM idempotency_keys WHERE key = 'liar-1'`);
    expect(stored).toEqual(fast ? [{ status: 'done' }] : []);
  });

  // Found by the first outside review, older than prepared statements: the completion updated no row and committed,
  // and the retry ran again. The fast path reads the completion's row count with its COMMIT's answer: the work has
  // committed, so the key keeps a 500 naming the cause. The general path's joined commit checks first: nothing commits.
  it('a handler that deletes its own key row gets a 500 naming it, and its key never commits twice', async () => {
    const { call, counted } = payApp('deleter', async (db, key) => {
      await db.insertInto('payments').values({ user_id: 'deleter', amount: 1 }).execute();
      await sql`DELETE FROM idempotency_keys WHERE key = ${key}`.execute(db);
    });
    const named = {
      code: 'INTERNAL_SERVER_ERROR',
      message: expect.stringMatching(/deleted or changed its own key's row/),
    };
    await expect(call('deleter-1')).rejects.toMatchObject(named);
    await expect(call('deleter-1')).rejects.toMatchObject(named);
    expect(counted.runs).toBe(name === 'pg-fast' ? 1 : 2);
    expect(await paymentsOf('deleter')).toBe(name === 'pg-fast' ? 1 : 0);
  });

  // The completion is prepared too (issue 29): a handler that deallocates it, which the trust boundary leaves to the
  // app, makes the completion fail before COMMIT. Before, the completion was plain text and this call committed.
  // Nothing was committed.
  it('a handler that deallocates everything in its transaction gets a 500 naming it; the retry runs once', async () => {
    const { call, counted } = payApp('dealloc', async (db) => {
      await sql`DEALLOCATE ALL`.execute(db);
      await db.insertInto('payments').values({ user_id: 'dealloc', amount: 1 }).execute();
    });
    await expect(call('dealloc-1')).rejects.toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      message: expect.stringMatching(/prepared completion was deallocated .* nothing was committed/),
    });
    expect(await paymentsOf('dealloc')).toBe(0);
    // The instance sends plain texts from then on: the retry with the same key runs and commits, once.
    expect(await call('dealloc-1')).toEqual({ run: 2 });
    expect(await call('dealloc-2')).toEqual({ run: 3 });
    expect(await call('dealloc-1')).toEqual({ run: 2 });
    expect(counted.runs).toBe(3);
    expect(await paymentsOf('dealloc')).toBe(2);
  });

  it('a new connection whose first claim finds an expired row takes it over', async () => {
    const first = onePool();
    const app = makeApp(first, { ttl: 200 });
    await app.caller('expired-1', 'expired').payments.create({ amount: 1 });
    await new Promise((r) => setTimeout(r, 300));
    const second = onePool(); // a new connection: nothing prepared on it yet
    const taker = makeApp(second, { ttl: 200 });
    expect(await taker.caller('expired-1', 'expired').payments.create({ amount: 2 })).toMatchObject({ amount: 2 });
    expect(taker.control.takeovers).toEqual([false]);
    expect(await paymentsOf('expired')).toBe(2);
    expect(await ours(second.raw)).toHaveLength(3);
  });

  it.runIf(name === 'pg-fast')('a takeover that lands on another, new connection than its claim', async () => {
    const first = onePool();
    await makeApp(first, { ttl: 200 }).caller('moved-1', 'moved').payments.create({ amount: 1 });
    await new Promise((r) => setTimeout(r, 300));
    // Each checkout comes from a pool of its own: the claim (which finds the expired row) runs on one new connection,
    // the takeover on another, where nothing was prepared.
    const connects: pg.Pool[] = [];
    const hopping: PgPoolLike = {
      connect: () => {
        const next = backend.newPool();
        connects.push(next);
        return next.connect() as never;
      },
    };
    const taker = makeApp({ db: first.db, pool: hopping as never }, { ttl: 200 });
    expect(await taker.caller('moved-1', 'moved').payments.create({ amount: 2 })).toMatchObject({ amount: 2 });
    expect(connects).toHaveLength(2);
    expect(await paymentsOf('moved')).toBe(2);
  });

  it.runIf(name === 'pg-fast')(
    'a connection that has them already (a new client object per checkout) is not an error',
    async () => {
      const { raw: pool } = onePool();
      // A pool wrapper that hands out a new object for the same connection each time: the fast path cannot tell it
      // prepared there, and its PREPARE finds the names taken (42P05).
      const wrapping: PgPoolLike = {
        connect: async () => {
          const client = await pool.connect();
          const fresh: PgClientLike = {
            query: (text: string, values?: readonly unknown[]) => client.query(text, values as unknown[]) as never,
            release: (error?: Error | boolean) => client.release(error as Error | undefined),
          };
          return fresh;
        },
      };
      const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
      const app = makeApp({ db, pool: wrapping as never });
      const answers = [];
      for (let i = 1; i <= 4; i++)
        answers.push(await app.caller(`wrapped-${i}`, 'wrapped').payments.create({ amount: i }));
      expect(app.control.runs).toBe(4);
      expect(await paymentsOf('wrapped')).toBe(4);
      const uncached = makeApp({ db, pool: wrapping as never }, { cache: false });
      for (let i = 1; i <= 4; i++) {
        expect(await uncached.caller(`wrapped-${i}`, 'wrapped').payments.create({ amount: i })).toEqual(answers[i - 1]);
      }
      expect(uncached.control.runs).toBe(0);
    },
  );

  it('concurrent duplicates on connections preparing for the first time: one run per key', async () => {
    const raw = backend.newPool(); // 4 new connections, all preparing at once
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: raw }) });
    const app = makeApp({ db, pool: name === 'pg-fast' ? raw : undefined }, { wait: 10_000 });
    app.control.delayMs = 20;
    const keys = ['cold-1', 'cold-2', 'cold-3', 'cold-4'];
    const settled = await Promise.allSettled(
      keys.flatMap((key) => [1, 2, 3, 4].map(() => app.caller(key, 'cold').payments.create({ amount: 1 }))),
    );
    expect(settled.filter((s) => s.status === 'rejected')).toEqual([]);
    expect(app.control.runs).toBe(4);
    expect(await paymentsOf('cold')).toBe(4);
    for (let k = 0; k < keys.length; k++) {
      const answers = settled.slice(k * 4, k * 4 + 4).map((s) => (s as PromiseFulfilledResult<unknown>).value);
      expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1);
    }
  });
});
