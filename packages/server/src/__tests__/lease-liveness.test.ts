import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectReason } from './expectations.js';
import { type AppDB, type Backend, deferred, killLeaseHolders, makeApp, openBackend, sleep, until } from './harness.js';

let keySeq = 0;
const newKey = () => `live-${Date.now().toString(36)}-${++keySeq}`;

/** A lease-mode claim is taken over only when its holder's connection is gone, never for missed renewals alone. */
describe.each(['pg-fast', 'pg-general'] as const)('lease liveness on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  const paymentsOf = async (userId: string) =>
    (await backend.query<{ amount: number }>(`SELECT amount FROM payments WHERE user_id = '${userId}'`)).map(
      (r) => r.amount,
    );

  // The handler takes 3× the lease.
  it('never takes over a live holder whose renewals cannot get a connection (pool max 1)', async () => {
    // Instance A has one connection, held by its handler's transaction: on the Kysely path no renewal gets through.
    const poolA = new pg.Pool({ connectionString: backend.url, max: 1 });
    poolA.on('error', () => {});
    const dbA = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: poolA }) });
    try {
      const a = makeApp({ db: dbA, pool: name === 'pg-fast' ? poolA : undefined }, { mode: 'lease', lease: 300 });
      const b = makeApp(backend.another(), { mode: 'lease', lease: 300, wait: 0 });
      a.control.delayMs = 900;
      const key = newKey();
      const original = a.caller(key, 'live-busy').payments.create({ amount: 5 });
      await until(() => a.control.runs === 1);
      // Well past the lease, which nothing renewed on the Kysely path: the holder is alive, so it keeps the key.
      await sleep(600);
      if (name === 'pg-general') expect(await leaseLeft(backend, key)).toBe(0);
      await expectReason(b.caller(key, 'live-busy').payments.create({ amount: 5 }), 'in_progress', 'CONFLICT');
      const result = await original;
      expect(await b.caller(key, 'live-busy').payments.create({ amount: 5 })).toEqual(result);
      expect([a.control.runs, b.control.runs]).toEqual([1, 0]);
      expect(await paymentsOf('live-busy')).toEqual([5]);
    } finally {
      await dbA.destroy();
    }
  });

  // It waited for a pooled connection (pool max 1).
  it('a holder taken over while waiting for a connection, before its handler ran, replays the new owner', async () => {
    // Instance A (one connection) gets X and Y at once: X's handler holds the connection at the gate while Y waits
    // for it, past its lease (no renewal of A gets through either). B's copy of Y may take Y over and run it; A's Y
    // never ran, so once it gets the connection it waits like a duplicate and answers B's result, not 409.
    const poolA = new pg.Pool({ connectionString: backend.url, max: 1 });
    poolA.on('error', () => {});
    const dbA = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: poolA }) });
    try {
      const a = makeApp(
        { db: dbA, pool: name === 'pg-fast' ? poolA : undefined },
        { mode: 'lease', lease: 300, wait: 10_000 },
      );
      const b = makeApp(backend.another(), { mode: 'lease', lease: 300, wait: 10_000 });
      const gate = deferred();
      a.control.gate = gate.promise;
      const [x, y] = [newKey(), newKey()];
      const onA = [
        a.caller(x, 'early-taken').payments.create({ amount: 1 }),
        a.caller(y, 'early-taken').payments.create({ amount: 2 }),
      ];
      for (const p of onA) p.catch(() => {}); // Awaited below.
      await until(() => a.control.atGate === 1);
      await sleep(600);
      const onB = b.caller(y, 'early-taken').payments.create({ amount: 2 });
      onB.catch(() => {}); // Awaited below.
      // B either took Y over and ran it, or (A held no claim on Y yet) claimed it fresh; either way it runs Y.
      await until(() => b.control.runs === 1);
      gate.resolve();
      const [fromA, fromB] = await Promise.allSettled([Promise.all(onA), onB]);
      expect(fromA.status).toBe('fulfilled');
      expect(fromB.status).toBe('fulfilled');
      const [, yOnA] = (fromA as PromiseFulfilledResult<unknown[]>).value;
      expect(yOnA).toEqual((fromB as PromiseFulfilledResult<unknown>).value);
      expect([a.control.runs, b.control.runs]).toEqual([1, 1]);
      expect((await paymentsOf('early-taken')).sort()).toEqual([1, 2]);
    } finally {
      await dbA.destroy();
    }
  });

  it('takes over a holder whose connection was killed, once its lease ran out, and fences the holder off', async () => {
    const a = makeApp(backend, { mode: 'lease', lease: 300 });
    const b = makeApp(backend.another(), { mode: 'lease', lease: 300, wait: 10_000 });
    const gate = deferred();
    a.control.gate = gate.promise;
    const key = newKey();
    const original = a.caller(key, 'live-dead').payments.create({ amount: 6 });
    await until(() => a.control.atGate === 1);
    // The holder's connection dies (as when its server crashes): its advisory lock goes with it.
    expect(await killLeaseHolders(backend)).toBe(1);
    const taken = await b.caller(key, 'live-dead').payments.create({ amount: 6 });
    expect(b.control.takeovers).toEqual([true]);
    gate.resolve();
    await expectReason(original, 'in_progress', 'CONFLICT');
    expect(await a.caller(key, 'live-dead').payments.create({ amount: 6 })).toEqual(taken);
    // The dead holder's write died with its transaction: one payment.
    expect(await paymentsOf('live-dead')).toEqual([6]);
  });
});

/** Milliseconds left on the key's lease by the database's clock (undefined without a row). */
async function leaseLeft(backend: Backend, key: string): Promise<number | undefined> {
  const rows = await backend.query<{ left: number }>(
    `SELECT greatest(0, extract(epoch from (locked_until - clock_timestamp())) * 1000)::float8 AS left
     FROM idempotency_keys WHERE key = '${key}'`,
  );
  return rows[0]?.left;
}
