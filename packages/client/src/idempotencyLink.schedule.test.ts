import type { Operation } from '@trpc/client';
import fc from 'fast-check';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { type CallRecord, violations } from './__tests__/callInvariants.js';
import { type AttemptPlan, type Event, scheduledLink } from './__tests__/scheduledLink.js';
import type { Answer } from './__tests__/scriptedLink.js';
import { idempotencyLink } from './idempotencyLink.js';
import type { IdempotencyLinkOptions } from './internals/options.js';
import { retryBudget } from './retryBudget.js';
import type { IdempotencyCallInfo } from './types.js';

/** `CHAOS_SEED` replays a run; `CHAOS_RUNS` runs more of them. */
const SEED = Number(process.env.CHAOS_SEED ?? 20_261_203);
const RUNS = Number(process.env.CHAOS_RUNS ?? 400);

const T0 = Date.UTC(2026, 0, 1);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const answer: fc.Arbitrary<AttemptPlan['answer']> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Answer>({ data: 'ok' }) },
  { weight: 2, arbitrary: fc.constantFrom<Answer>('network', 'hang') },
  {
    weight: 2,
    arbitrary: fc.record({
      status: fc.constantFrom(408, 429, 500, 502, 503, 504),
      headers: fc.option(fc.record({ 'retry-after': fc.constantFrom('0', '1', '3') }), { nil: undefined }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      status: fc.constant(409),
      reason: fc.constant('in_progress'),
      retryAfterMs: fc.integer({ min: 0, max: 2_000 }),
    }),
  },
  { weight: 1, arbitrary: fc.constantFrom<Answer>({ status: 400 }, { status: 409 }, { status: 422 }) },
  { weight: 1, arbitrary: fc.constant('complete-only' as const) },
);

const attemptPlan: fc.Arbitrary<AttemptPlan> = fc.record({
  answer,
  onUnsubscribe: fc.constantFrom('async', 'sync', 'outlives'),
});

const callPlan = fc.record({
  attempts: fc.array(attemptPlan, { minLength: 1, maxLength: 5 }),
  abort: fc.boolean(),
  unsubscribe: fc.boolean(),
  /** The caller brings its own key (unique per call) instead of a generated one. */
  ownKey: fc.boolean(),
});
type CallPlan = typeof callPlan extends fc.Arbitrary<infer T> ? T : never;

const linkOptions = fc.record({
  attempts: fc.integer({ min: 1, max: 4 }),
  baseDelayMs: fc.integer({ min: 0, max: 400 }),
  maxDelayMs: fc.integer({ min: 0, max: 2_000 }),
  jitter: fc.constantFrom('full', 'equal', 'decorrelated', 'none'),
  attemptTimeoutMs: fc.integer({ min: 1, max: 3_000 }),
  maxElapsedMs: fc.integer({ min: 0, max: 12_000 }),
  budget: fc.option(fc.record({ minRetries: fc.integer({ min: 0, max: 3 }), retryRatio: fc.constantFrom(0, 0.5) }), {
    nil: undefined,
  }),
  random: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  /** Which user callback throws, if any. */
  throws: fc.constantFrom('nothing', 'nothing', 'nothing', 'hooks', 'random', 'budget'),
});

type LinkOptions = typeof linkOptions extends fc.Arbitrary<infer T> ? T : never;

/** Runs the link under one schedule and returns the broken promises (none when it behaved). */
async function run(s: fc.Scheduler, calls: CallPlan[], opts: LinkOptions) {
  const log: Event[] = [];
  const hookDone = () => {
    if (opts.throws === 'hooks') throw new Error('a hook that throws');
  };
  const budget = opts.budget ? retryBudget(opts.budget) : undefined;
  vi.spyOn(console, 'error').mockImplementation(() => {});
  const linkOpts: IdempotencyLinkOptions<any> = {
    procedures: 'all',
    attempts: opts.attempts,
    baseDelayMs: opts.baseDelayMs,
    maxDelayMs: opts.maxDelayMs,
    jitter: opts.jitter,
    attemptTimeoutMs: opts.attemptTimeoutMs,
    maxElapsedMs: opts.maxElapsedMs,
    budget:
      opts.throws === 'budget'
        ? {
            recordAnswered: () => {},
            canRetry: () => {
              throw new Error('a budget that throws');
            },
            tryAcquireRetry: () => true,
          }
        : (budget ?? false),
    random: () => {
      if (opts.throws === 'random') throw new Error('a random source that throws');
      return opts.random;
    },
    generateKey: (() => {
      let n = 0;
      return () => `generated-${++n}`;
    })(),
    onRetry: (e) => {
      log.push({ type: 'retry', call: e.op.id, attempt: e.attempt });
      hookDone();
    },
    onSettled: (e) => {
      log.push({ type: 'settled', call: e.op.id, error: e.error });
      hookDone();
    },
  };
  const link = idempotencyLink<any>(linkOpts)({});
  // Attempt n follows the plan's n-th entry, the last one once the plan runs out.
  const downstream = scheduledLink(
    s,
    (call, attempt) => {
      const plans = calls[call]!.attempts;
      return plans[Math.min(attempt, plans.length) - 1]!;
    },
    log,
  );
  const records: CallRecord[] = [];
  const open = new Set<number>();

  calls.forEach((plan, call) => {
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    const givenKey = plan.ownKey ? `form-${call}` : undefined;
    records.push({ call, info, ...(givenKey !== undefined && { givenKey }) });
    const ac = new AbortController();
    const op: Operation = {
      id: call,
      type: 'mutation',
      path: 'pay',
      input: {},
      context: { idempotencyInfo: info, ...(givenKey !== undefined && { idempotencyKey: givenKey }) },
      signal: ac.signal,
    };
    void s.schedule(Promise.resolve(), `start call ${call}`).then(() => {
      log.push({ type: 'start', call, at: Date.now() });
      open.add(call);
      const subscription = link({ op, next: downstream }).subscribe({
        next: (envelope) =>
          log.push({ type: 'deliver', call, kind: 'next', data: envelope.result.data, at: Date.now() }),
        error: (error) => {
          open.delete(call);
          log.push({ type: 'deliver', call, kind: 'error', error, at: Date.now() });
        },
        complete: () => {
          open.delete(call);
          log.push({ type: 'deliver', call, kind: 'complete', at: Date.now() });
        },
      });
      if (plan.abort) {
        void s.schedule(Promise.resolve(), `abort call ${call}`).then(() => {
          log.push({ type: 'caller-abort', call });
          ac.abort();
        });
      }
      if (plan.unsubscribe) {
        void s.schedule(Promise.resolve(), `unsubscribe call ${call}`).then(() => {
          log.push({ type: 'caller-unsubscribe', call });
          open.delete(call);
          subscription.unsubscribe();
        });
      }
    });
  });

  // Time moves only when the scheduler picks the clock: timeouts and backoffs interleave with answers.
  let tickScheduled = false;
  const problems: string[] = [];
  for (let step = 0; step < 500; step++) {
    if (vi.getTimerCount() > 0 && !tickScheduled) {
      tickScheduled = true;
      void s.schedule(Promise.resolve(), 'clock: next timer').then(() => {
        tickScheduled = false;
        vi.advanceTimersToNextTimer();
      });
    }
    if (s.count() === 0) break;
    await s.waitOne();
    for (let i = 0; i < 20; i++) await Promise.resolve();
    const started = log.filter((e) => e.type === 'start').length;
    if (started === calls.length && open.size === 0 && vi.getTimerCount() > 0) {
      problems.push(`${vi.getTimerCount()} timer(s) left behind once every call had ended`);
      break;
    }
  }
  return { problems: [...problems, ...violations(log, records, opts)], log };
}

test('under every interleaving of answers, stale answers, timeouts, aborts and unsubscribes, each call ends once, with the value an attempt returned or an error, and leaves nothing behind', async () => {
  let failure: string | undefined;
  await fc
    .assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(callPlan, { minLength: 1, maxLength: 3 }),
        linkOptions,
        async (s, calls, opts) => {
          vi.clearAllTimers();
          vi.setSystemTime(T0); // every run from the same instant: the budget's time slots line up alike
          const { problems, log } = await run(s, calls, opts);
          if (problems.length > 0) {
            failure = `${problems.join('\n')}\n\nhistory:\n${log.map((e) => JSON.stringify(e)).join('\n')}\n\nschedule:\n${s
              .report()
              .map((t) => t.label)
              .join('\n')}`;
          }
          return problems.length === 0;
        },
      ),
      { seed: SEED, numRuns: RUNS },
    )
    .catch((error: unknown) => {
      throw new Error(`seed ${SEED} (replay: CHAOS_SEED=${SEED})\n${failure}\n\n${String(error)}`);
    });
  expect(failure).toBeUndefined();
});
