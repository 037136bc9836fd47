import { TRPCError } from '@trpc/server';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency, type IdempotencyOptions } from '../index.js';
import { expectReason, failure } from './expectations.js';
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
const newKey = () => `s-${Date.now().toString(36)}-${++keySeq}`;

/** An app whose handler reports the lock_timeout it runs under, optionally held by a gate. */
function lockTimeoutApp(
  backend: { db: Backend['db']; pool: Backend['pool'] },
  opts: Partial<IdempotencyOptions<Ctx, AppDB, true>>,
) {
  const control: { gate?: Promise<void>; runs: number } = { runs: 0 };
  const idempotency = createIdempotency({ db: backend.db, pool: backend.pool, scope: () => 'suspect', ...opts });
  const router = t.router({
    m: t.procedure.use(idempotency.middleware).mutation(async ({ ctx }) => {
      control.runs++;
      if (control.gate) await control.gate;
      const { rows } = await sql<{ v: string }>`SELECT current_setting('lock_timeout') AS v`.execute(
        ctx.idempotency.db,
      );
      return rows[0]!.v;
    }),
  });
  const call = (key: string) => router.createCaller({ userId: 'x', headers: { 'idempotency-key': key } }).m();
  return { call, control };
}

describe.each(BACKENDS)('suspicions of issue 11 on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  it.skipIf(name === 'pglite')(
    '(a) a takeover re-checked after a lock wait leaves the handler its own lock_timeout, not `wait`',
    async () => {
      const key = newKey();
      // An expired result: the next claim takes it over.
      await backend.query(`INSERT INTO idempotency_keys (scope, key, fingerprint, path, status, response, expires_at)
        VALUES ('suspect', '${key}', 'old', 'm', 'done', '{}', clock_timestamp() - interval '1 second')`);
      // Another session locks the row (a lock only: the claim's INSERT … ON CONFLICT does not wait for it).
      const holder = await backend.newPool().connect();
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM idempotency_keys WHERE key = '${key}' FOR UPDATE`);
      // B's takeover UPDATE waits for that lock.
      const b = lockTimeoutApp(backend, { wait: 20_000 });
      const second = b.call(key);
      const lockWaiters = async () =>
        Number(
          (
            await backend.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            )
          )[0]!.n,
        );
      await expect.poll(lockWaiters, { timeout: 10_000 }).toBe(1);
      // The holder commits a new version that is still expired and free: Postgres re-checks B's condition on it.
      await holder.query(`UPDATE idempotency_keys SET response = '{"v":2}' WHERE key = '${key}'`);
      await holder.query('COMMIT');
      holder.release();
      expect(await second.catch((e) => String(e))).toBe('0');
      expect(b.control.runs).toBe(1);
    },
  );

  for (const mode of ['transaction', 'lease'] as const) {
    // On PGlite the database runs in this process on the app's own clock: no skew between them can exist (and faking
    // Date would move the database's clock too).
    it.skipIf(name === 'pglite')(
      `(b) ${mode}: the replay cache never replays a key past its expiry, whatever the app's clock says`,
      async () => {
        const app = makeApp(backend, { mode, ttl: 1000 });
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
      const app = makeApp(backend, { mode, ttl: 300, cache: false });
      app.control.delayMs = 600;
      const key = newKey();
      const first = await app.caller(key, `short-ttl-${mode}`).payments.create({ amount: 1 });
      app.control.delayMs = undefined;
      expect(await app.caller(key, `short-ttl-${mode}`).payments.create({ amount: 1 })).toEqual(first);
      expect(app.control.runs).toBe(1);
    });
  }

  it('(d) transaction mode: a different payload waiting in-process runs once the original released its key, as across instances', async () => {
    const app = makeApp(backend, { wait: 10_000 });
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

  it('(d) transaction mode: a different payload waiting in-process gets 422 once the original stored its result', async () => {
    const app = makeApp(backend, { wait: 10_000 });
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

  it('(d) lease mode: a different payload in-process gets 422 at once while the original runs, as across instances', async () => {
    const app = makeApp(backend, { mode: 'lease', wait: 10_000 });
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
