import { TRPCError } from '@trpc/server';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { expectReason, failure, reasonOf } from './expectations.js';
import {
  type AppDB,
  BACKENDS,
  type Backend,
  type Ctx,
  deferred,
  makeApp,
  openBackend,
  sleep,
  t,
  until,
} from './harness.js';

let keySeq = 0;
const newKey = () => `k-${Date.now().toString(36)}-${++keySeq}`;

describe.each(BACKENDS)('transaction mode on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  const paymentsOf = async (userId: string) =>
    Number(
      (await backend.query<{ n: string }>(`SELECT count(*) AS n FROM payments WHERE user_id = '${userId}'`))[0]!.n,
    );
  const keyRows = async (key: string) =>
    backend.query<{ status: string; response: string | null }>(
      `SELECT status, response FROM idempotency_keys WHERE key = '${key}'`,
    );

  it('runs the handler once and replays its result for the same key', async () => {
    const app = makeApp(backend);
    const key = newKey();
    const first = await app.caller(key, 'once').payments.create({ amount: 10 });
    const second = await app.caller(key, 'once').payments.create({ amount: 10 });
    expect(second).toEqual(first);
    expect(app.control.runs).toBe(1);
    expect(await paymentsOf('once')).toBe(1);
    expect(app.events.map((e) => e.type)).toEqual(['executed', 'replayed']);
    expect(await keyRows(key)).toEqual([{ status: 'done', response: expect.any(String) }]);
  });

  it('replays from the database when the in-process cache does not have the result', async () => {
    const writer = makeApp(backend);
    const key = newKey();
    const first = await writer.caller(key, 'db-replay').payments.create({ amount: 11 });
    const reader = makeApp(backend, { cache: false });
    expect(await reader.caller(key, 'db-replay').payments.create({ amount: 11 })).toEqual(first);
    expect(reader.control.runs).toBe(0);
    expect(reader.events.map((e) => e.type)).toEqual(['replayed']);
  });

  it('runs 100 concurrent requests with one key exactly once, and all get the same result', async () => {
    const app = makeApp(backend);
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    const calls = Array.from({ length: 100 }, () => app.caller(key, 'hundred').payments.create({ amount: 5 }));
    await sleep(50);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(app.control.runs).toBe(1);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await paymentsOf('hundred')).toBe(1);
  });

  it.skipIf(name === 'pglite')(
    'runs once across two server instances, the duplicates blocking in Postgres',
    async () => {
      const a = makeApp(backend);
      const b = makeApp(backend.another());
      const key = newKey();
      const gate = deferred();
      a.control.gate = gate.promise;
      b.control.gate = gate.promise;
      const calls = Array.from({ length: 40 }, (_, i) =>
        (i % 2 ? a : b).caller(key, 'two').payments.create({ amount: 7 }),
      );
      await sleep(100);
      gate.resolve();
      const results = await Promise.all(calls);
      expect(a.control.runs + b.control.runs).toBe(1);
      expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
      expect(await paymentsOf('two')).toBe(1);
      // The instance that did not run it blocked in Postgres on the original's claim, then replayed.
      const other = a.control.runs === 1 ? b : a;
      expect(other.events.filter((e) => e.type === 'waited').length).toBeGreaterThan(0);
    },
  );

  it('answers 422 payload_mismatch for the same key with another input or procedure, and keeps scopes apart', async () => {
    const app = makeApp(backend);
    const key = newKey();
    await app.caller(key, 'mm').payments.create({ amount: 1 });
    await expectReason(
      app.caller(key, 'mm').payments.create({ amount: 2 }),
      'payload_mismatch',
      'UNPROCESSABLE_CONTENT',
    );
    await expectReason(app.caller(key, 'mm').payments.refund({ amount: 1 }), 'payload_mismatch');
    // Not from the cache: a second instance sees the stored fingerprint.
    const other = makeApp(backend, { cache: false });
    await expectReason(other.caller(key, 'mm').payments.create({ amount: 2 }), 'payload_mismatch');
    await other.caller(key, 'mm-other-scope').payments.create({ amount: 2 });
    expect(other.control.runs).toBe(1);
    expect(app.events.filter((e) => e.type === 'mismatch')).toHaveLength(2);
  });

  it('rolls back the handler writes of a 5xx, releases the key, and the retry runs once', async () => {
    const app = makeApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'boom' });
    const error = await failure(app.caller(key, 'fail5xx').payments.create({ amount: 3 }));
    expect(error.message).toBe('boom');
    // The ROLLBACK is not awaited by the failed call.
    await expect.poll(() => keyRows(key)).toEqual([]);
    expect(await paymentsOf('fail5xx')).toBe(0);
    app.control.throwAfterWrite = undefined;
    await app.caller(key, 'fail5xx').payments.create({ amount: 3 });
    await app.caller(key, 'fail5xx').payments.create({ amount: 3 });
    expect(app.control.runs).toBe(2);
    expect(await paymentsOf('fail5xx')).toBe(1);
    expect(app.events.map((e) => e.type)).toEqual(['released', 'executed', 'replayed']);
  });

  it('releases the key on an unknown throw, which is never stored', async () => {
    const app = makeApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new Error('kaput');
    const error = await failure(app.caller(key, 'unknown').payments.create({ amount: 3 }));
    expect(error.code).toBe('INTERNAL_SERVER_ERROR');
    await expect.poll(() => keyRows(key)).toEqual([]);
  });

  it('stores a deterministic error without the handler writes and replays it', async () => {
    const app = makeApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    const first = await failure(app.caller(key, 'declined').payments.create({ amount: 4 }));
    expect(first.code).toBe('PAYMENT_REQUIRED');
    const fresh = makeApp(backend, { cache: false });
    const replayed = await failure(fresh.caller(key, 'declined').payments.create({ amount: 4 }));
    expect([replayed.code, replayed.message]).toEqual(['PAYMENT_REQUIRED', 'card declined']);
    expect(fresh.control.runs).toBe(0);
    expect(await paymentsOf('declined')).toBe(0);
    expect((await keyRows(key))[0]?.status).toBe('done');
  });

  it('answers 400 key_missing without a key, and runs without idempotency when not required', async () => {
    const app = makeApp(backend);
    await expectReason(app.caller(undefined).payments.create({ amount: 1 }), 'key_missing', 'BAD_REQUEST');
    expect(app.control.runs).toBe(0);
    const loose = createIdempotency({ db: backend.db, pool: backend.pool, scope: () => 'loose', required: false });
    const router = t.router({
      m: t.procedure.use(loose.middleware).mutation(({ ctx }) => ctx.idempotency?.key ?? null),
    });
    expect(await router.createCaller({ userId: 'x', headers: {} }).m()).toBeNull();
    expect(await router.createCaller({ userId: 'x', headers: { 'idempotency-key': 'loose-1' } }).m()).toBe('loose-1');
  });

  it('takes the key from the `key` option when given, validating it like a header', async () => {
    const idem = createIdempotency({
      db: backend.db,
      pool: backend.pool,
      scope: () => 'custom-key',
      key: ({ ctx }: { ctx: Ctx }) => ctx.headers['x-my-key'],
    });
    const router = t.router({ m: t.procedure.use(idem.middleware).mutation(({ ctx }) => ctx.idempotency.key) });
    const call = (key: string | undefined) =>
      router.createCaller({ userId: 'x', headers: key === undefined ? {} : { 'x-my-key': key } }).m();
    expect(await call('from-option')).toBe('from-option');
    await expectReason(call(undefined), 'key_missing');
    await expectReason(call('bad key'), 'key_invalid');
  });

  it('reports each outcome with its scope, key, path and duration', async () => {
    const app = makeApp(backend);
    const key = newKey();
    await app.caller(key, 'events').payments.create({ amount: 1 });
    await app.caller(key, 'events').payments.create({ amount: 1 });
    expect(app.events).toEqual([
      { type: 'executed', scope: 'user:events', key, path: 'payments.create', durationMs: expect.any(Number) },
      { type: 'replayed', scope: 'user:events', key, path: 'payments.create', durationMs: expect.any(Number) },
    ]);
    expect(app.events.every((e) => e.durationMs >= 0)).toBe(true);
  });

  it('answers 400 key_invalid for malformed keys and stores nothing', async () => {
    const app = makeApp(backend);
    const bad = ['', ' ', 'a'.repeat(256), 'tab\tkey', 'caf\u00e9', '"unterminated', '"a" "b"'];
    for (const key of bad) {
      const error = await failure(app.caller(key, 'badkeys').payments.create({ amount: 1 }));
      // An empty or blank header reads as no usable key: invalid, never run.
      expect(reasonOf(error)).toBe('key_invalid');
    }
    expect(app.control.runs).toBe(0);
    expect(await backend.query(`SELECT 1 FROM idempotency_keys WHERE scope = 'user:badkeys'`)).toEqual([]);
  });

  it('answers 409 in_progress at once with wait 0 while the original runs, then replays after it', async () => {
    const app = makeApp(backend, { wait: 0 });
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    const original = app.caller(key, 'busy').payments.create({ amount: 9 });
    await until(() => app.control.runs === 1);
    const error = await expectReason(app.caller(key, 'busy').payments.create({ amount: 9 }), 'in_progress', 'CONFLICT');
    expect((error.cause as { retryAfterMs?: number }).retryAfterMs).toBeGreaterThan(0);
    gate.resolve();
    const result = await original;
    expect(await app.caller(key, 'busy').payments.create({ amount: 9 })).toEqual(result);
    expect(app.events.map((e) => e.type)).toEqual(['conflict', 'executed', 'replayed']);
  });

  it.skipIf(name === 'pglite')('bounds the wait in Postgres: another instance gets 409 after `wait`', async () => {
    const a = makeApp(backend);
    const b = makeApp(backend.another(), { wait: 150 });
    const key = newKey();
    const gate = deferred();
    a.control.gate = gate.promise;
    const original = a.caller(key, 'pgwait').payments.create({ amount: 9 });
    await until(() => a.control.runs === 1);
    await expectReason(b.caller(key, 'pgwait').payments.create({ amount: 9 }), 'in_progress');
    const zero = makeApp(backend.another(), { wait: 0 });
    await expectReason(zero.caller(key, 'pgwait').payments.create({ amount: 9 }), 'in_progress');
    // A patient instance blocks inside Postgres on the original's claim until it commits, then replays.
    const patient = makeApp(backend.another(), { wait: 10_000 });
    const blocked = patient.caller(key, 'pgwait').payments.create({ amount: 9 });
    const lockWaiters = async () =>
      Number(
        (
          await backend.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        )[0]!.n,
      );
    await expect.poll(lockWaiters, { timeout: 10_000 }).toBe(1);
    gate.resolve();
    const result = await original;
    expect(await blocked).toEqual(result);
    expect(patient.events.map((e) => e.type)).toEqual(['waited', 'replayed']);
    expect(await b.caller(key, 'pgwait').payments.create({ amount: 9 })).toEqual(result);
    expect(b.control.runs + zero.control.runs + patient.control.runs).toBe(0);
  });

  it.skipIf(name === 'pglite')('bounds only the claim with `wait`, never the handler own locks', async () => {
    const idem = createIdempotency({ db: backend.db, pool: backend.pool, scope: () => 'locks', wait: 50 });
    await backend.query(`INSERT INTO payments (user_id, amount) VALUES ('lock-holder', 1)`);
    const router = t.router({
      m: t.procedure.use(idem.middleware).mutation(async ({ ctx }) => {
        const setting = await sql<{ v: string }>`SELECT current_setting('lock_timeout') AS v`.execute(
          ctx.idempotency.db,
        );
        // Waits ~300 ms for the row lock another connection holds: far past `wait`.
        await ctx.idempotency.db
          .updateTable('payments')
          .set({ amount: 2 })
          .where('user_id', '=', 'lock-holder')
          .execute();
        return setting.rows[0]!.v;
      }),
    });
    const holder = backend.another();
    const locked = deferred();
    const release = holder.db.transaction().execute(async (trx) => {
      await trx.updateTable('payments').set({ amount: 3 }).where('user_id', '=', 'lock-holder').execute();
      locked.resolve();
      await sleep(300);
    });
    await locked.promise;
    expect(await router.createCaller({ userId: 'x', headers: { 'idempotency-key': newKey() } }).m()).toBe('0');
    await release;
  });

  it('fails with response_too_large, rolls back the writes and frees the key', async () => {
    const app = makeApp(backend, { maxResponseBytes: 100 });
    const key = newKey();
    app.control.result = () => ({ blob: 'x'.repeat(200) });
    await expectReason(
      app.caller(key, 'big').payments.create({ amount: 1 }),
      'response_too_large',
      'INTERNAL_SERVER_ERROR',
    );
    expect(await paymentsOf('big')).toBe(0);
    expect(await keyRows(key)).toEqual([]);
  });

  it('replays Date, Map and undefined outputs as they were with the default serializer', async () => {
    const app = makeApp(backend, { cache: false });
    const key = newKey();
    const at = new Date('2026-01-02T03:04:05.678Z');
    app.control.result = () => ({ at, tags: new Map([['a', 1]]), none: undefined });
    await app.caller(key, 'types').payments.create({ amount: 1 });
    const replayed = (await app.caller(key, 'types').payments.create({ amount: 1 })) as any;
    expect(replayed.at).toBeInstanceOf(Date);
    expect(replayed.at.getTime()).toBe(at.getTime());
    expect(replayed.tags).toEqual(new Map([['a', 1]]));
    expect('none' in replayed).toBe(true);
  });

  it('runs an expired key again', async () => {
    const app = makeApp(backend, { ttl: 100 });
    const key = newKey();
    await app.caller(key, 'ttl').payments.create({ amount: 1 });
    await sleep(150);
    await app.caller(key, 'ttl').payments.create({ amount: 1 });
    expect(app.control.runs).toBe(2);
    expect(await paymentsOf('ttl')).toBe(2);
  });

  it('takes an expired key over for another input, and a stored error of the new run replaces the old result', async () => {
    const key = newKey();
    await makeApp(backend, { ttl: 100 }).caller(key, 'retake').payments.create({ amount: 1 });
    await sleep(150);
    const second = makeApp(backend);
    second.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    expect((await failure(second.caller(key, 'retake').payments.create({ amount: 2 }))).code).toBe('PAYMENT_REQUIRED');
    // The takeover survived the rollback of the handler's writes: the key now holds the new input's error.
    const fresh = makeApp(backend, { cache: false });
    const replayed = await failure(fresh.caller(key, 'retake').payments.create({ amount: 2 }));
    expect([replayed.code, replayed.message]).toEqual(['PAYMENT_REQUIRED', 'card declined']);
    await expectReason(fresh.caller(key, 'retake').payments.create({ amount: 1 }), 'payload_mismatch');
    expect(fresh.control.runs).toBe(0);
    expect(await paymentsOf('retake')).toBe(1);
  });

  it('gives the handler a transaction it cannot nest, and that refuses queries once the call is over', async () => {
    let message = '';
    const leaked: { db?: Kysely<AppDB> } = {};
    const idem = createIdempotency({ db: backend.db, pool: backend.pool, scope: () => 'nest' });
    const router = t.router({
      m: t.procedure.use(idem.middleware).mutation(async ({ ctx }) => {
        try {
          // Typed `never` on a Transaction; a JavaScript caller can still try.
          await (ctx.idempotency.db as Kysely<AppDB>).transaction().execute(async () => {});
        } catch (error) {
          message = (error as Error).message;
        }
        leaked.db = ctx.idempotency.db;
        return ctx.idempotency.db.isTransaction;
      }),
    });
    expect(await router.createCaller({ userId: 'x', headers: { 'idempotency-key': newKey() } }).m()).toBe(true);
    expect(message).toMatch(/transaction/);
    await expect(leaked.db!.selectFrom('payments').selectAll().execute()).rejects.toThrow();
  });
});
