import { TRPCError } from '@trpc/server';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency, type IdempotencyOptions } from '../index.js';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, insertKeyRows, openDialectBackend } from './dialect-backends.js';
import { expectReason, failure } from './expectations.js';
import { type AppDB, type Ctx, deferred, sleep, t, until } from './harness.js';

let keySeq = 0;
const newKey = () => `s-${Date.now().toString(36)}-${++keySeq}`;

/** The bound on a lock wait the session is under: Postgres' lock_timeout, MySQL's innodb_lock_wait_timeout (s). */
const lockWaitBound = (dialect: DialectBackend['dialect']) =>
  dialect === 'postgres' ? "SELECT current_setting('lock_timeout') AS v" : 'SELECT @@innodb_lock_wait_timeout AS v';

/** An app whose handler reports the lock wait bound it runs under. */
function lockTimeoutApp(backend: DialectBackend, opts: Partial<IdempotencyOptions<Ctx, AppDB, true>>) {
  const control = { runs: 0 };
  const idempotency = createIdempotency({ db: backend.db, pool: backend.pool, scope: () => 'suspect', ...opts });
  const router = t.router({
    m: t.procedure.use(idempotency.middleware).mutation(async ({ ctx }) => {
      control.runs++;
      const { rows } = await sql<{ v: unknown }>`${sql.raw(lockWaitBound(backend.dialect))}`.execute(
        ctx.idempotency.db,
      );
      return String(rows[0]!.v);
    }),
  });
  const call = (key: string) => router.createCaller({ userId: 'x', headers: { 'idempotency-key': key } }).m();
  return { call, control };
}

describe.each(DIALECT_BACKENDS)('suspicions of issue 11 on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  // PGlite has one connection: no other session can hold the row. SQLite has no row locks: a claim waits for the
  // database's write lock before its statement starts (BEGIN IMMEDIATE), so no claim ever waits inside a statement
  // and has its condition checked again on a newer row version, and no wait bound is set on the handler's session.
  it.skipIf(name === 'pglite' || name === 'sqlite' || name === 'libsql')(
    '(a) a takeover after a lock wait on the row leaves the handler its own lock wait bound, not `wait`',
    async () => {
      const key = newKey();
      // An expired result: the next claim takes it over.
      await insertKeyRows(backend, [
        { scope: 'suspect', key, path: 'm', status: 'done', response: '{}', expiresInMs: -1000 },
      ]);
      const [own] = await backend.query<{ v: unknown }>(lockWaitBound(backend.dialect));
      const wait = 20_000;
      // The handler's bound is the session's own: `wait` (in ms on Postgres, whole seconds on MySQL) must not leak.
      expect([String(wait), String(wait / 1000)]).not.toContain(String(own?.v));
      // Another session locks the row. Postgres: the claim's INSERT … ON CONFLICT does not wait for a lock only, the
      // takeover UPDATE does, and Postgres re-checks its condition on the version committed meanwhile. MySQL: the
      // claim's INSERT waits for it (its duplicate-key check), then finds the key taken and takes the row over.
      const locked = deferred();
      const commit = deferred();
      const where = `${backend.keyColumn} = ${backend.text(key)}`;
      const holder = backend
        .another()
        .db.transaction()
        .execute(async (trx) => {
          await sql.raw(`SELECT 1 FROM idempotency_keys WHERE ${where} FOR UPDATE`).execute(trx);
          locked.resolve();
          await commit.promise;
          // A new version that is still expired and free.
          await sql.raw(`UPDATE idempotency_keys SET response = '{"v":2}' WHERE ${where}`).execute(trx);
        });
      await locked.promise;
      const b = lockTimeoutApp(backend, { wait });
      const second = b.call(key);
      await expect.poll(() => backend.lockWaiters(), { timeout: 10_000 }).toBe(1);
      commit.resolve();
      await holder;
      expect(await second.catch((e) => String(e))).toBe(String(own?.v));
      expect(b.control.runs).toBe(1);
    },
  );

  for (const mode of ['transaction', 'lease'] as const) {
    // On PGlite the database runs in this process on the app's own clock: no skew between them can exist (and faking
    // Date would move the database's clock too). MySQL and SQLite keep epoch ms by the database's clock (SQLite's
    // is the operating system's, which faking Date does not move): their rows expire by it, as Postgres' do.
    it.skipIf(name === 'pglite')(
      `(b) ${mode}: the replay cache never replays a key past its expiry, whatever the app's clock says`,
      async () => {
        const app = makeDialectApp(backend, { mode, ttl: 1000 });
        const key = newKey();
        await app.caller(key, `skew-${mode}`).payments.create({ amount: 1 });
        // The app's clock runs an hour behind the database's: by the database, the key has expired.
        vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - 3_600_000 });
        await sleep(1100);
        await app.caller(key, `skew-${mode}`).payments.create({ amount: 1 });
        expect(app.control.runs).toBe(2);
        expect(app.events.map((e) => e.type)).toEqual(['executed', 'executed']);
      },
    );

    it(`(c) ${mode}: a ttl shorter than the handler's run still keeps the result it stored`, async () => {
      const app = makeDialectApp(backend, { mode, ttl: 300, cache: false });
      app.control.delayMs = 600;
      const key = newKey();
      const first = await app.caller(key, `short-ttl-${mode}`).payments.create({ amount: 1 });
      app.control.delayMs = undefined;
      expect(await app.caller(key, `short-ttl-${mode}`).payments.create({ amount: 1 })).toEqual(first);
      expect(app.control.runs).toBe(1);
    });
  }

  // As across instances.
  it('(d) transaction mode: another payload waiting in-process runs once the original released its key', async () => {
    const app = makeDialectApp(backend, { wait: 10_000 });
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    // The original fails with an error that is not stored (its run only): the key is released.
    app.control.throwAfterWrite = () => {
      app.control.throwAfterWrite = undefined;
      return new TRPCError({ code: 'BAD_GATEWAY', message: 'provider down' });
    };
    const original = app.caller(key, 'gate-mm').payments.create({ amount: 1 });
    await until(() => app.control.runs === 1);
    const other = app.caller(key, 'gate-mm').payments.create({ amount: 2 });
    await sleep(50);
    app.control.gate = undefined;
    gate.resolve();
    expect((await failure(original)).code).toBe('BAD_GATEWAY');
    // The database path makes it wait on the original's claim, then claim the released key and run.
    expect(await other).toMatchObject({ amount: 2 });
    expect(app.control.runs).toBe(2);
  });

  it('(d) transaction mode: another payload waiting in-process gets 422 once the original stored', async () => {
    const app = makeDialectApp(backend, { wait: 10_000 });
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    const original = app.caller(key, 'gate-mm2').payments.create({ amount: 1 });
    await until(() => app.control.runs === 1);
    const other = app.caller(key, 'gate-mm2').payments.create({ amount: 2 });
    await sleep(50);
    gate.resolve();
    await original;
    await expectReason(other, 'payload_mismatch');
    expect(app.control.runs).toBe(1);
  });

  // As across instances.
  it('(d) lease mode: another payload in-process gets 422 at once while the original runs', async () => {
    const app = makeDialectApp(backend, { mode: 'lease', wait: 10_000 });
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    const original = app.caller(key, 'gate-mm3').payments.create({ amount: 1 });
    await until(() => app.control.runs === 1);
    await expectReason(app.caller(key, 'gate-mm3').payments.create({ amount: 2 }), 'payload_mismatch');
    gate.resolve();
    await original;
  });
});
