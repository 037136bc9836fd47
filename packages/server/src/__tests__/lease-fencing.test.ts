import { TRPCError } from '@trpc/server';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, type IdempotencyOptions } from '../index.js';
import { makeDialectApp, takeOverRunningHolder } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { expectReason, reasonOf } from './expectations.js';
import { type AppDB, type Ctx, sleep, t, until } from './harness.js';

let keySeq = 0;
const newKey = () => `f-${Date.now().toString(36)}-${++keySeq}`;

describe.each(DIALECT_BACKENDS)('lease fencing on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  /**
   * A running holder can be taken over only once its connection died, which needs a second instance whose holder can
   * die alone: pg and MariaDB. PGlite is one connection in the server's process (README "Dialects", "in one process"
   * row: calls queue); a SQLite holder's transaction holds the write lock, so nobody takes its claim over while it
   * lives (README "Dialects", "lease liveness" row).
   */
  const takeoverOfLiveHandler = name === 'pg-fast' || name === 'pg-general' || name === 'mariadb';
  /** A second instance at all: every dialect but PGlite. */
  const several = name !== 'pglite';

  /** A holder whose lease was taken over must never answer as if its outcome were the key's. */
  for (const outcome of ['success', 'stored error'] as const) {
    it.skipIf(!takeoverOfLiveHandler)(
      `a fenced-off holder answers 409 in_progress for its ${outcome} once a takeover stored a success`,
      async () => {
        const key = newKey();
        const user = `fenced-${outcome.replace(' ', '-')}`;
        const { stale, fresh, staleCall, freshResult, release } = await takeOverRunningHolder(backend, key, user);
        expect(fresh.control.takeovers).toEqual([true]);
        // A stale holder that fails with a deterministic error would store it if it still owned the key.
        if (outcome === 'stored error') {
          stale.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
        }
        release();
        await expectReason(staleCall, 'in_progress', 'CONFLICT');
        expect(stale.events.map((e) => e.type)).toEqual(['conflict']);
        // One key, one answer: every later call gets the winner's success, and only the winner's write committed.
        expect(await stale.caller(key, user).payments.create({ amount: 4 })).toEqual(freshResult);
        const rows = await backend.query<{ n: unknown }>(
          `SELECT count(*) AS n FROM payments WHERE user_id = ${backend.text(user)}`,
        );
        expect(Number(rows[0]?.n)).toBe(1);
      },
    );
  }

  it.skipIf(!several)(
    'never lets a live holder be taken over unknowingly, its renewals starved: ' +
      'it renews, or learns first and is fenced off',
    async () => {
      // Instance A: as many concurrent lease-mode calls as pool connections (SQLite: its one connection), each
      // handler far longer than the lease.
      const a = slowApp(backend.another({ max: 2 }), 3500, { lease: 1000 });
      const b = slowApp(backend.another(), 0, { lease: 1000, wait: 0 });
      const keys = [`busy-${Date.now().toString(36)}-1`, `busy-${Date.now().toString(36)}-2`];
      const first = keys.map((key) => a.call(key));
      // Both handlers run side by side; on SQLite the second call queues behind the first's transaction.
      await until(() => a.runs.length === (backend.dialect === 'sqlite' ? 1 : 2));
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
        const rows = await backend.query<{ n: unknown }>(
          `SELECT count(*) AS n FROM payments WHERE user_id = ${backend.text(key)}`,
        );
        expect(Number(rows[0]!.n)).toBe(1);
      }
      // Each holder is alive, starved renewals or not (Postgres: its transaction holds its key's advisory lock;
      // MariaDB: its connection the key's named lock; SQLite: its transaction the write lock): nobody took over.
      expect(b.runs).toEqual([]);
    },
  );

  it('completes and stores a handler that outlasts its lease, its signal never aborted', async () => {
    const app = slowApp(backend, 400, { lease: 100 });
    const key = `outlast-${Date.now().toString(36)}`;
    const first = await app.call(key);
    expect(first.ok).toBe(true);
    expect(await app.call(key)).toEqual(first);
    expect(app.runs).toHaveLength(1);
    expect(app.runs[0]!.abortedAt).toBeUndefined();
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
