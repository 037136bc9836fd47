import { createTestDatabase } from '@trpc-idempotency/test-db';
import type { Kysely } from 'kysely';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { createLedger, type ThrowingCallback } from '../harness/payments-app.ts';
import { createPaymentsClient, emptyClientStats, type PaymentInput } from '../harness/payments-client.ts';
import { chaosSeed } from '../harness/seeded-random.ts';
import { createPglite, startInstance } from './instances.ts';

const SEED = chaosSeed(1107);
const POOL_MAX = 2;
/** More calls than the pool holds: a leaked connection per call would starve the pool. */
const CALLS_PER_INPUT = POOL_MAX + 1;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    // Bounded: a leaked transaction or mutex must fail the test, not hang its cleanup.
    await Promise.race([cleanup().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 3_000))]);
  }
});

/** What reaches each callback: a success, or (storeErrors, the serializer's error path) a stored error. */
const INPUTS: Record<ThrowingCallback, Omit<PaymentInput, 'ref'>[]> = {
  scope: [{ amount: 1 }],
  key: [{ amount: 1 }],
  storeErrors: [{ amount: 1, decline: true }],
  serializer: [{ amount: 1 }, { amount: 1, decline: true }],
  onEvent: [{ amount: 1 }],
};

const CASES = (['pool', 'kysely', 'pglite'] as const).flatMap((path) =>
  (['transaction', 'lease'] as const).flatMap((mode) =>
    (['scope', 'key', 'storeErrors', 'serializer', 'onEvent'] as const).map(
      (callback) => [callback, mode, path] as const,
    ),
  ),
);

/**
 * Each user callback throws for a few calls — more than the pool has connections — and then behaves: every key
 * must answer again (its handler run once more, or its outcome replayed), and nothing may be left behind: no
 * connection idle in transaction, no key in progress, no PGlite mutex held.
 */
describe('user callbacks that throw', () => {
  it.each(CASES)(
    'leave no session, lock or mutex behind when %s throws (%s mode, %s path)',
    async (callback, mode, path) => {
      const recorder = new HistoryRecorder(mode);
      let db: Kysely<any>;
      let url: string | undefined;
      if (path === 'pglite') {
        db = await createPglite();
        cleanups.push(() => db.destroy());
      } else {
        const tdb = await createTestDatabase(inject('pgAdminUrl'));
        cleanups.push(() => tdb.drop());
        db = tdb.db;
        url = tdb.url;
        await createLedger(db);
      }
      const throwIn: { current: ThrowingCallback | undefined } = { current: undefined };
      const instance = await startInstance({
        name: 'A',
        path,
        recorder,
        mode,
        throwIn,
        poolMax: POOL_MAX,
        ...(url ? { url } : { pglite: db }),
      });
      cleanups.push(() => instance.close());
      const stats = emptyClientStats();
      const once = createPaymentsClient({ url: instance.url, stats, recorder, link: { attempts: 1 } });
      const retrying = createPaymentsClient({
        url: instance.url,
        stats,
        recorder,
        link: { attemptTimeoutMs: 1_000, baseDelayMs: 50, maxDelayMs: 300, maxElapsedMs: 3_000 },
      });
      const calls = INPUTS[callback].flatMap((input, i) =>
        Array.from({ length: CALLS_PER_INPUT }, (_, j) => ({
          key: `throw-${SEED}-${callback}-${i}-${j}`,
          input: { ...input, ref: `throw-${i}-${j}` },
        })),
      );
      // Keys completed before the callback starts throwing: sent again while it throws, they take the replay path
      // (the cache, `deserialize`), not the execution path.
      const completed = INPUTS[callback].map((input, i) => ({
        key: `throw-${SEED}-${callback}-${i}-done`,
        input: { ...input, ref: `throw-${i}-done` },
      }));
      const send = (client: typeof once, list: typeof calls) =>
        Promise.allSettled(
          list.map(({ key, input }) => client.payments.create.mutate(input, { context: { idempotencyKey: key } })),
        );
      throwIn.current = undefined;
      const before = await send(retrying, completed);
      const runsBefore = recorder.history.executions.length;
      throwIn.current = callback;
      const failed = await send(once, [...calls, ...completed]);
      const faultRuns = new Set(recorder.history.executions.slice(runsBefore).map((e) => e.run));
      throwIn.current = undefined;
      const after = await send(retrying, [...calls, ...completed]);
      // A run the throwing callback broke may run again; nothing else may.
      recorder.excuse((e) => faultRuns.has(e.run), `the ${callback} callback threw`);
      const verdict = await judgeRun(recorder, db, {
        label: `faults:throwing-callbacks:${callback}:${mode}:${path}`,
        ...(path === 'pglite' ? { pglite: true } : {}),
        settleMs: 2_000,
      });
      // A declined payment is an answer.
      const unanswered = (results: PromiseSettledResult<unknown>[], list: typeof calls) =>
        results.flatMap((r, i) =>
          r.status === 'fulfilled' || (r.reason as { data?: { code?: string } }).data?.code === 'PAYMENT_REQUIRED'
            ? []
            : [`${list[i]?.key}: ${String(r.reason).slice(0, 120)}`],
        );
      const left = unanswered(after, [...calls, ...completed]);
      console.log(
        `[faults:throwing-callbacks:${callback}:${mode}:${path}] seed ${SEED}: while throwing ${failed.filter((r) => r.status === 'rejected').length} of ${failed.length} calls were refused (${completed.length} of them replays of completed keys, a declined payment counts as refused); afterwards ${failed.length - left.length} answered`,
      );
      expect(unanswered(before, completed)).toEqual([]);
      expect(left).toEqual([]);
      expect(violationList(verdict)).toEqual([]);
    },
  );
});
