import { TRPCError } from '@trpc/server';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { keyRow, paymentsOf, watchedInstance } from './dialect-rows.js';
import { expectReason, failure, reasonOf } from './expectations.js';
import { type AppDB, type Ctx, deferred, sleep, t, until } from './harness.js';

let keySeq = 0;
const newKey = () => `k-${Date.now().toString(36)}-${++keySeq}`;

describe.each(DIALECT_BACKENDS)('transaction mode on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  /** PGlite is one in-process database: no second instance, no other connection (README "in one process"). */
  const several = name !== 'pglite';
  const sqlite = name === 'sqlite' || name === 'libsql';
  const payments = async (userId: string) => (await paymentsOf(backend, userId)).length;

  it('runs the handler once and replays its result for the same key', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    const first = await app.caller(key, 'once').payments.create({ amount: 10 });
    const second = await app.caller(key, 'once').payments.create({ amount: 10 });
    expect(second).toEqual(first);
    expect(app.control.runs).toBe(1);
    expect(await payments('once')).toBe(1);
    expect(app.events.map((e) => e.type)).toEqual(['executed', 'replayed']);
    expect(await keyRow(backend, key)).toMatchObject({ status: 'done', response: expect.any(String) });
  });

  it('replays from the database when the in-process cache does not have the result', async () => {
    const writer = makeDialectApp(backend);
    const key = newKey();
    const first = await writer.caller(key, 'db-replay').payments.create({ amount: 11 });
    const reader = makeDialectApp(backend, { cache: false });
    expect(await reader.caller(key, 'db-replay').payments.create({ amount: 11 })).toEqual(first);
    expect(reader.control.runs).toBe(0);
    expect(reader.events.map((e) => e.type)).toEqual(['replayed']);
  });

  it('runs 100 concurrent requests with one key exactly once, and all get the same result', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    const calls = Array.from({ length: 100 }, () => app.caller(key, 'hundred').payments.create({ amount: 5 }));
    await until(() => app.control.runs === 1);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(app.control.runs).toBe(1);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await payments('hundred')).toBe(1);
  });

  it.skipIf(!several)('runs once across two server instances, the duplicates waiting in the database', async () => {
    const [first, second] = [watchedInstance(backend), watchedInstance(backend)];
    const a = makeDialectApp(first);
    const b = makeDialectApp(second);
    const key = newKey();
    const gate = deferred();
    a.control.gate = gate.promise;
    b.control.gate = gate.promise;
    const calls = Array.from({ length: 40 }, (_, i) =>
      (i % 2 ? a : b).caller(key, 'two').payments.create({ amount: 7 }),
    );
    await until(() => a.control.runs + b.control.runs === 1);
    // The other instance's first call waits in the database for the claim (its others wait for that one here).
    const waiting = async () => (await first.seenWaiting()) || (await second.seenWaiting());
    await expect.poll(waiting, { timeout: 10_000 }).toBe(true);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(a.control.runs + b.control.runs).toBe(1);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await payments('two')).toBe(1);
    // The instance that did not run it waited, then replayed (its own duplicates of the first call report `waited`
    // on every dialect; Postgres also reports the first one's wait in the database).
    const other = a.control.runs === 1 ? b : a;
    expect(other.events.filter((e) => e.type === 'waited').length).toBeGreaterThan(0);
  });

  it('answers 422 payload_mismatch for one key with another input or procedure, and keeps scopes apart', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    await app.caller(key, 'mm').payments.create({ amount: 1 });
    await expectReason(
      app.caller(key, 'mm').payments.create({ amount: 2 }),
      'payload_mismatch',
      'UNPROCESSABLE_CONTENT',
    );
    await expectReason(app.caller(key, 'mm').payments.refund({ amount: 1 }), 'payload_mismatch');
    // Not from the cache: a second instance sees the stored fingerprint.
    const other = makeDialectApp(backend, { cache: false });
    await expectReason(other.caller(key, 'mm').payments.create({ amount: 2 }), 'payload_mismatch');
    await other.caller(key, 'mm-other-scope').payments.create({ amount: 2 });
    expect(other.control.runs).toBe(1);
    expect(app.events.filter((e) => e.type === 'mismatch')).toHaveLength(2);
  });

  it('rolls back the handler writes of a 5xx, releases the key, and the retry runs once', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'boom' });
    const error = await failure(app.caller(key, 'fail5xx').payments.create({ amount: 3 }));
    expect(error.message).toBe('boom');
    // The ROLLBACK is not awaited by the failed call.
    await expect.poll(() => keyRow(backend, key)).toBeUndefined();
    // Nor is a connection left holding the rolled-back transaction (SQLite: its write lock).
    await expect.poll(() => backend.idleInTransaction()).toBe(0);
    expect(await payments('fail5xx')).toBe(0);
    app.control.throwAfterWrite = undefined;
    await app.caller(key, 'fail5xx').payments.create({ amount: 3 });
    await app.caller(key, 'fail5xx').payments.create({ amount: 3 });
    expect(app.control.runs).toBe(2);
    expect(await payments('fail5xx')).toBe(1);
    expect(app.events.map((e) => e.type)).toEqual(['released', 'executed', 'replayed']);
  });

  // The trust boundary (docs/reliability.md): the handler is the app's own code, so nothing checks it on every call.
  // Where the completion's row count arrives with its COMMIT's answer (Postgres on the fast path and on PGlite), the
  // handler's work has committed by then: the key keeps a 500 naming the cause. Elsewhere the count (MySQL, SQLite) or
  // the completion's own check (the general path's joined commit, whose driver hides row counts) comes first and
  // nothing commits.
  it('says why when the handler deletes its own key row or marks it done, and never runs the key twice', async () => {
    const app = makeDialectApp(backend);
    const committed = name === 'pg-fast' || name === 'pglite';
    const keys = (db: Kysely<AppDB>) => db.withTables<{ idempotency_keys: { key: string; status: string } }>();
    const tampering = {
      deletes: (db: Kysely<AppDB>, key: string) =>
        keys(db).deleteFrom('idempotency_keys').where('key', '=', key).execute(),
      'marks done': (db: Kysely<AppDB>, key: string) =>
        keys(db).updateTable('idempotency_keys').set({ status: 'done' }).where('key', '=', key).execute(),
    };
    for (const [how, tamper] of Object.entries(tampering)) {
      const key = newKey();
      const runs = app.control.runs;
      app.control.afterWrite = tamper;
      const error = await failure(app.caller(key, `tamper-${how}`).payments.create({ amount: 3 }));
      expect([how, error.code, error.message]).toEqual([
        how,
        'INTERNAL_SERVER_ERROR',
        expect.stringMatching(/deleted or changed its own key's row/),
      ]);
      await expect.poll(() => backend.idleInTransaction()).toBe(0);
      app.control.afterWrite = undefined;
      if (committed) {
        // The payment committed once; every retry gets the same error and the handler never runs again.
        expect(await payments(`tamper-${how}`)).toBe(1);
        expect(await keyRow(backend, key)).toMatchObject({ status: 'done', response: expect.any(String) });
        for (const cache of [true, false]) {
          const retry = cache ? app : makeDialectApp(backend, { cache: false });
          const again = await failure(retry.caller(key, `tamper-${how}`).payments.create({ amount: 3 }));
          expect([how, again.code, again.message]).toEqual([how, error.code, error.message]);
          expect(retry.control.runs).toBe(cache ? runs + 1 : 0);
        }
        expect(await payments(`tamper-${how}`)).toBe(1);
      } else {
        // Neither the payment nor the handler's change to the key row was committed: the retry runs once.
        expect(await payments(`tamper-${how}`)).toBe(0);
        expect(await keyRow(backend, key)).toBeUndefined();
        const retried = await app.caller(key, `tamper-${how}`).payments.create({ amount: 3 });
        expect(await app.caller(key, `tamper-${how}`).payments.create({ amount: 3 })).toEqual(retried);
        expect(await payments(`tamper-${how}`)).toBe(1);
        expect(app.control.runs).toBe(runs + 2);
      }
    }
  });

  it.runIf(name === 'pg-fast' || name === 'pg-general')(
    'refuses a query the handler starts after it returned, or runs it inside the call transaction',
    async () => {
      const app = makeDialectApp(backend);
      const late: Promise<string>[] = [];
      const userId = `late-${Date.now().toString(36)}`;
      app.control.afterWrite = async (db) => {
        late.push(
          new Promise((resolve) =>
            setTimeout(() => {
              // The row records its transaction (the top-level one, also from inside a savepoint).
              db.insertInto('payments')
                .values({ user_id: userId, amount: sql<number>`(txid_current() % 1000000000)::int` })
                .execute()
                .then(
                  () => resolve('ran'),
                  (error: Error) => resolve(error.message),
                );
            }, 0),
          ),
        );
      };
      for (let i = 0; i < 20; i++) await app.caller(newKey(), userId).payments.create({ amount: 1 });
      const outcomes = await Promise.all(late);
      // A late query may have run only inside its call's transaction, the one that completed a key row.
      const rows = await backend.query<{ amount: number; keyed: number }>(
        `SELECT p.amount, (SELECT count(*)::int FROM idempotency_keys k
           WHERE k.xmin::text::bigint % 1000000000 = p.amount) AS keyed
         FROM payments p WHERE p.user_id = ${backend.text(userId)} AND p.amount <> 1`,
      );
      expect(rows.filter((r) => r.keyed !== 1)).toEqual([]);
      expect(outcomes.filter((o) => o !== 'ran' && !/after the idempotent call finished/.test(o))).toEqual([]);
    },
  );

  it('releases the key on an unknown throw, which is never stored', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new Error('kaput');
    const error = await failure(app.caller(key, 'unknown').payments.create({ amount: 3 }));
    expect(error.code).toBe('INTERNAL_SERVER_ERROR');
    await expect.poll(() => keyRow(backend, key)).toBeUndefined();
    await expect.poll(() => backend.idleInTransaction()).toBe(0);
  });

  it('stores a deterministic error without the handler writes and replays it', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    const first = await failure(app.caller(key, 'declined').payments.create({ amount: 4 }));
    expect(first.code).toBe('PAYMENT_REQUIRED');
    const fresh = makeDialectApp(backend, { cache: false });
    const replayed = await failure(fresh.caller(key, 'declined').payments.create({ amount: 4 }));
    expect([replayed.code, replayed.message]).toEqual(['PAYMENT_REQUIRED', 'card declined']);
    expect(fresh.control.runs).toBe(0);
    expect(await payments('declined')).toBe(0);
    expect((await keyRow(backend, key))?.status).toBe('done');
  });

  it('answers 400 key_missing without a key, and runs without idempotency when not required', async () => {
    const app = makeDialectApp(backend);
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
    const app = makeDialectApp(backend);
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
    const app = makeDialectApp(backend);
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
    const app = makeDialectApp(backend, { wait: 0 });
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

  it.skipIf(!several)('bounds the wait in the database: another instance gets 409 after `wait`', async () => {
    const a = makeDialectApp(backend);
    // MariaDB waits whole seconds, rounded up: 150 ms waits 1 s there, 0 waits 0 s (README "`wait` bound").
    const b = makeDialectApp(backend.another(), { wait: 150 });
    const key = newKey();
    const gate = deferred();
    a.control.gate = gate.promise;
    const original = a.caller(key, 'pgwait').payments.create({ amount: 9 });
    await until(() => a.control.runs === 1);
    await expectReason(b.caller(key, 'pgwait').payments.create({ amount: 9 }), 'in_progress');
    const zero = makeDialectApp(backend.another(), { wait: 0 });
    await expectReason(zero.caller(key, 'pgwait').payments.create({ amount: 9 }), 'in_progress');
    // A patient instance waits in the database for the original's claim (its row; SQLite: the write lock) until it
    // commits, then replays.
    const patientInstance = watchedInstance(backend);
    const patient = makeDialectApp(patientInstance, { wait: 10_000 });
    const blocked = patient.caller(key, 'pgwait').payments.create({ amount: 9 });
    await expect.poll(patientInstance.seenWaiting, { timeout: 10_000 }).toBe(true);
    gate.resolve();
    const result = await original;
    expect(await blocked).toEqual(result);
    // README "what it cannot promise": MySQL and SQLite report `waited` only for a duplicate of the same process.
    expect(patient.events.map((e) => e.type)).toEqual(
      backend.dialect === 'postgres' ? ['waited', 'replayed'] : ['replayed'],
    );
    expect(await b.caller(key, 'pgwait').payments.create({ amount: 9 })).toEqual(result);
    expect(b.control.runs + zero.control.runs + patient.control.runs).toBe(0);
  });

  // SQLite: the claim takes the database's write lock and the handler's transaction keeps it, so no other
  // connection holds a lock the handler could wait for (README "transaction": BEGIN IMMEDIATE). PGlite: one
  // connection (README "in one process").
  it.skipIf(!several || sqlite)('bounds only the claim with `wait`, never the handler own locks', async () => {
    // The claim's bound (Postgres lock_timeout 50 ms; MariaDB innodb_lock_wait_timeout 0 s, scoped to the claim)
    // would fail the handler's UPDATE below, which waits for a row lock another connection holds.
    const wait = name === 'mariadb' ? 0 : 50;
    const idem = createIdempotency({ db: backend.db, pool: backend.pool, scope: () => 'locks', wait });
    await backend.query(`INSERT INTO payments (user_id, amount) VALUES ('lock-holder', 1)`);
    const lockTimeout = (db: Kysely<AppDB>) =>
      (name === 'mariadb'
        ? sql<{ v: unknown }>`SELECT @@innodb_lock_wait_timeout AS v`
        : sql<{ v: unknown }>`SELECT current_setting('lock_timeout') AS v`
      )
        .execute(db)
        .then((r) => String(r.rows[0]?.v));
    const sessionDefault = await lockTimeout(backend.db);
    const router = t.router({
      m: t.procedure.use(idem.middleware).mutation(async ({ ctx }) => {
        const setting = await lockTimeout(ctx.idempotency.db);
        await ctx.idempotency.db
          .updateTable('payments')
          .set({ amount: 2 })
          .where('user_id', '=', 'lock-holder')
          .execute();
        return setting;
      }),
    });
    const holder = backend.another();
    const locked = deferred();
    const release = holder.db.transaction().execute(async (trx) => {
      await trx.updateTable('payments').set({ amount: 3 }).where('user_id', '=', 'lock-holder').execute();
      locked.resolve();
      // Let go once the handler waits for this row, and has waited past `wait`.
      await expect.poll(() => backend.lockWaiters(), { timeout: 10_000 }).toBe(1);
      await sleep(wait * 5);
    });
    await locked.promise;
    expect(await router.createCaller({ userId: 'x', headers: { 'idempotency-key': newKey() } }).m()).toBe(
      sessionDefault,
    );
    await release;
  });

  it('fails with response_too_large, rolls back the writes and frees the key', async () => {
    const app = makeDialectApp(backend, { maxResponseBytes: 100 });
    const key = newKey();
    app.control.result = () => ({ blob: 'x'.repeat(200) });
    await expectReason(
      app.caller(key, 'big').payments.create({ amount: 1 }),
      'response_too_large',
      'INTERNAL_SERVER_ERROR',
    );
    expect(await payments('big')).toBe(0);
    expect(await keyRow(backend, key)).toBeUndefined();
    await expect.poll(() => backend.idleInTransaction()).toBe(0);
  });

  it('replays Date, Map and undefined outputs as they were with the default serializer', async () => {
    const app = makeDialectApp(backend, { cache: false });
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
    const app = makeDialectApp(backend, { ttl: 100 });
    const key = newKey();
    await app.caller(key, 'ttl').payments.create({ amount: 1 });
    await sleep(200);
    await app.caller(key, 'ttl').payments.create({ amount: 1 });
    expect(app.control.runs).toBe(2);
    expect(await payments('ttl')).toBe(2);
  });

  it('takes an expired key over for another input; a stored error of the new run replaces the old result', async () => {
    const key = newKey();
    await makeDialectApp(backend, { ttl: 100 }).caller(key, 'retake').payments.create({ amount: 1 });
    await sleep(200);
    const second = makeDialectApp(backend);
    second.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    expect((await failure(second.caller(key, 'retake').payments.create({ amount: 2 }))).code).toBe('PAYMENT_REQUIRED');
    // The takeover survived the rollback of the handler's writes: the key now holds the new input's error.
    const fresh = makeDialectApp(backend, { cache: false });
    const replayed = await failure(fresh.caller(key, 'retake').payments.create({ amount: 2 }));
    expect([replayed.code, replayed.message]).toEqual(['PAYMENT_REQUIRED', 'card declined']);
    await expectReason(fresh.caller(key, 'retake').payments.create({ amount: 1 }), 'payload_mismatch');
    expect(fresh.control.runs).toBe(0);
    expect(await payments('retake')).toBe(1);
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
