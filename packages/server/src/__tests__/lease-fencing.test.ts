import { TRPCError } from '@trpc/server';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, type IdempotencyOptions } from '../index.js';
import { expectReason, reasonOf } from './expectations.js';
import {
  type AppDB,
  type Backend,
  type Ctx,
  deferred,
  killLeaseHolders,
  makeApp,
  openBackend,
  sleep,
  t,
  until,
} from './harness.js';

let keySeq = 0;
const newKey = () => `f-${Date.now().toString(36)}-${++keySeq}`;

/** A holder whose lease was taken over must never answer as if its outcome were the key's. */
describe.each(['pg-fast', 'pg-general'] as const)('a fenced-off lease holder on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  it('answers 409 in_progress for its stored error once a takeover stored a success, like its success path', async () => {
    const stale = makeApp(backend, { mode: 'lease' });
    const fresh = makeApp(backend.another(), { mode: 'lease' });
    const key = newKey();
    const gate = deferred();
    stale.control.gate = gate.promise;
    const staleCall = stale.caller(key, 'fenced-error').payments.create({ amount: 4 });
    await until(() => stale.control.runs === 1);
    // The holder's connection is lost (its advisory lock with it) and its lease runs out while it still runs.
    expect(await killLeaseHolders(backend)).toBe(1);
    await backend.query(
      `UPDATE idempotency_keys SET locked_until = clock_timestamp() - interval '1 second' WHERE key = '${key}'`,
    );
    const freshResult = await fresh.caller(key, 'fenced-error').payments.create({ amount: 4 });
    // The stale holder now fails with a deterministic error, which would be stored if it still owned the key.
    stale.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    gate.resolve();
    await expectReason(staleCall, 'in_progress', 'CONFLICT');
    expect(stale.events.map((e) => e.type)).toEqual(['conflict']);
    // One key, one answer: every later call gets the winner's success.
    expect(await stale.caller(key, 'fenced-error').payments.create({ amount: 4 })).toEqual(freshResult);
  });
});

/** One run of the slow handler below: when it started and when its `ctx.idempotency.signal` aborted. */
interface Run {
  key: string;
  startedAt: number;
  abortedAt?: number;
}

/**
 * A lease-mode app whose handler writes, then spends `handlerMs` outside the database, ignoring its signal (the
 * worst case: a handler that does not stop must still be fenced off).
 */
function slowApp(
  backend: { db: Kysely<AppDB>; pool: pg.Pool | undefined },
  handlerMs: number,
  opts: Partial<IdempotencyOptions<Ctx, AppDB, true>>,
) {
  const runs: Run[] = [];
  const idempotency = createIdempotency({
    db: backend.db,
    pool: backend.pool,
    scope: () => 'busy-pool',
    mode: 'lease',
    ...opts,
  });
  const router = t.router({
    charge: t.procedure
      .use(idempotency.middleware)
      .input(z.object({ amount: z.number().int() }))
      .mutation(async ({ ctx, input }) => {
        const run: Run = { key: ctx.idempotency.key, startedAt: performance.now() };
        runs.push(run);
        // Read as optional so this test compiles and fails (rather than not compiling) where the signal is missing.
        const signal = (ctx.idempotency as { signal?: AbortSignal }).signal;
        signal?.addEventListener('abort', () => {
          run.abortedAt = performance.now();
        });
        await ctx.idempotency.db
          .insertInto('payments')
          .values({ user_id: ctx.idempotency.key, amount: input.amount })
          .execute();
        await sleep(handlerMs);
        return { key: ctx.idempotency.key, startedAt: run.startedAt };
      }),
  });
  const call = (key: string) =>
    router
      .createCaller({ userId: 'x', headers: { 'idempotency-key': key } })
      .charge({ amount: 1 })
      .then(
        (value) => ({ ok: true as const, value }),
        (error: TRPCError) => ({ ok: false as const, reason: reasonOf(error), code: error.code }),
      );
  return { call, runs, idempotency };
}

describe.each(['pg-fast', 'pg-general'] as const)('lease renewal with a busy pool on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  it('never lets a live holder be taken over unknowingly: it renews, or learns first and is fenced off', async () => {
    // Instance A: as many concurrent lease-mode calls as pool connections, each handler far longer than the lease.
    const poolA = new pg.Pool({ connectionString: backend.url, max: 2 });
    poolA.on('error', () => {});
    const dbA = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool: poolA }) });
    try {
      // A lease of 1 s, far shorter than the handlers: on the Kysely path no renewal gets through.
      const a = slowApp({ db: dbA, pool: name === 'pg-fast' ? poolA : undefined }, 3500, { lease: 1000 });
      const b = slowApp(backend.another(), 0, { lease: 1000, wait: 0 });
      const keys = [`busy-${Date.now().toString(36)}-1`, `busy-${Date.now().toString(36)}-2`];
      const first = keys.map((key) => a.call(key));
      await sleep(2200); // more than two lease lengths
      const second = await Promise.all(keys.map((key) => b.call(key)));
      const firstAnswers = await Promise.all(first);
      for (const [i, key] of keys.entries()) {
        const original = a.runs.find((r) => r.key === key)!;
        const takeover = b.runs.find((r) => r.key === key);
        if (takeover) {
          // The holder learnt it lost its lease before anyone took it over, and its late success was refused.
          expect(original.abortedAt, `${key}: the holder was told before the takeover`).toBeDefined();
          expect(original.abortedAt!).toBeLessThan(takeover.startedAt);
          expect(firstAnswers[i]).toEqual({ ok: false, reason: 'in_progress', code: 'CONFLICT' });
        } else {
          expect(second[i]).toEqual({ ok: false, reason: 'in_progress', code: 'CONFLICT' });
          expect(firstAnswers[i]!.ok).toBe(true);
        }
        // Every answer for the key after both finished is one outcome, and it was committed once.
        const later = await b.call(key);
        expect(later.ok).toBe(true);
        for (const answer of [firstAnswers[i], second[i]]) if (answer!.ok) expect(answer).toEqual(later);
        const rows = await backend.query<{ n: string }>(`SELECT count(*) AS n FROM payments WHERE user_id = '${key}'`);
        expect(Number(rows[0]!.n)).toBe(1);
      }
      // Each holder's transaction holds its key's advisory lock, starved renewals or not: nobody took over.
      expect(b.runs).toEqual([]);
    } finally {
      await dbA.destroy();
    }
  });
});

describe('lease mode on PGlite (one connection: nobody can take a claim over while the process lives)', () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend('pglite');
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  it('completes and stores a handler that outlasts its lease, its signal never aborted', async () => {
    const app = slowApp(backend, 400, { lease: 100 });
    const key = `pglite-${Date.now().toString(36)}`;
    const first = await app.call(key);
    expect(first.ok).toBe(true);
    expect(await app.call(key)).toEqual(first);
    expect(app.runs).toHaveLength(1);
    expect(app.runs[0]!.abortedAt).toBeUndefined();
  });
});
