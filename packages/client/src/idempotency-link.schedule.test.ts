import type { Operation } from '@trpc/client';
import fc from 'fast-check';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { type CallRecord, violations } from './__tests__/call-invariants.js';
import { type AttemptPlan, type Event, scheduledLink } from './__tests__/scheduled-link.js';
import type { Answer } from './__tests__/scripted-link.js';
import { idempotencyLink } from './idempotency-link.js';
import type { IdempotencyLinkOptions } from './internals/options.js';
import { retryBudget } from './retry-budget.js';
import type { IdempotencyCallInfo } from './types.js';

/** `CHAOS_SEED` replays a run; `CHAOS_RUNS` runs more of them. */
const SEED = Number(process.env.CHAOS_SEED ?? 20_261_203);
const RUNS = Number(process.env.CHAOS_RUNS ?? 1_000);

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
  onUnsubscribe: fc.constantFrom('async', 'sync', 'outlives', 'outlives'),
  // Mostly prompt; sometimes slower than the attempt timeout.
  latencyMs: fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 300 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 4_000 }) },
    { weight: 1, arbitrary: fc.constant('sync' as const) },
  ),
});

const oneIn = (n: number) => fc.integer({ min: 1, max: n }).map((k) => k === 1);

const callPlan = fc.record({
  attempts: fc.array(attemptPlan, { minLength: 1, maxLength: 5 }),
  // One call in five is aborted, one in five left by its caller: the rest run to their own end.
  abort: oneIn(5),
  unsubscribe: oneIn(5),
  /** The caller brings its own key (unique per call) instead of a generated one. */
  ownKey: fc.boolean(),
});
type CallPlan = typeof callPlan extends fc.Arbitrary<infer T> ? T : never;

const linkOptions = fc.record({
  attempts: fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 2, max: 4 }) },
    { weight: 1, arbitrary: fc.constant(1) },
  ),
  baseDelayMs: fc.integer({ min: 0, max: 400 }),
  maxDelayMs: fc.integer({ min: 0, max: 2_000 }),
  jitter: fc.constantFrom('full', 'equal', 'decorrelated', 'none'),
  attemptTimeoutMs: fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 200, max: 3_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 200 }) },
  ),
  // Mostly room for retries after a timeout; sometimes a cap that cuts attempts short.
  maxElapsedMs: fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 6_000, max: 30_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 3_000 }) },
  ),
  budget: fc.option(fc.record({ minRetries: fc.integer({ min: 0, max: 3 }), retryRatio: fc.constantFrom(0, 0.5) }), {
    nil: undefined,
  }),
  random: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  /** Which user callback throws, if any. */
  throws: fc.oneof(
    { weight: 9, arbitrary: fc.constant('nothing' as const) },
    { weight: 1, arbitrary: fc.constantFrom('hooks', 'random', 'budget') },
  ),
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
      const subscription = link({ op, next: downstream.next }).subscribe({
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
    const linkTimers = vi.getTimerCount() - downstream.timers();
    if (started === calls.length && open.size === 0 && linkTimers > 0) {
      problems.push(`${linkTimers} timer(s) left behind once every call had ended`);
      break;
    }
  }
  return { problems: [...problems, ...violations(log, records, opts)], log };
}

/** How often each situation the test is about came up, so a generator that drifts away from them fails. */
const coverage = {
  'a stale attempt’s value delivered': 0,
  'a stale attempt’s error or complete ignored': 0,
  'a retry delivered a value': 0,
  'ended by an attempt timeout': 0,
  'ended by the caller’s abort': 0,
  'left by the caller': 0,
  'failed with attempts to spare (budget, cap, or a final answer)': 0,
  'user code threw': 0,
};

function tally(log: readonly Event[], calls: number, opts: LinkOptions) {
  if (opts.throws !== 'nothing') coverage['user code threw']++;
  for (let call = 0; call < calls; call++) {
    const events = log.filter((e) => e.call === call);
    const endAt = events.findIndex(
      (e) => (e.type === 'deliver' && e.kind !== 'complete') || e.type === 'caller-unsubscribe',
    );
    const end = events[endAt];
    const sends = events.filter((e) => e.type === 'send').length;
    const released = new Set<number>();
    events.slice(0, endAt).forEach((e) => {
      if (e.type === 'unsubscribe') released.add(e.attempt);
      if (e.type === 'emit' && e.kind !== 'next' && released.has(e.attempt))
        coverage['a stale attempt’s error or complete ignored']++;
    });
    if (end?.type === 'caller-unsubscribe') coverage['left by the caller']++;
    if (end?.type !== 'deliver') continue;
    if (end.kind === 'next') {
      if (String(end.data) !== `${call}.${sends}`) coverage['a stale attempt’s value delivered']++;
      else if (sends > 1) coverage['a retry delivered a value']++;
      continue;
    }
    const cause = (end.error as { cause?: { name?: string } }).cause?.name;
    if (cause === 'AttemptTimeoutError') coverage['ended by an attempt timeout']++;
    if (cause === 'AbortError' && events.some((e) => e.type === 'caller-abort'))
      coverage['ended by the caller’s abort']++;
    if (sends < opts.attempts) coverage['failed with attempts to spare (budget, cap, or a final answer)']++;
  }
}

// Under every interleaving of answers, stale answers, timeouts, aborts and unsubscribes.
test('each call ends once, with the value an attempt returned or an error, and leaves nothing behind', async () => {
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
          tally(log, calls.length, opts);
          if (problems.length > 0) {
            const history = log.map((e) => JSON.stringify(e)).join('\n');
            const schedule = s
              .report()
              .map((t) => t.label)
              .join('\n');
            failure = `${problems.join('\n')}\n\nhistory:\n${history}\n\nschedule:\n${schedule}`;
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
  console.info(
    `[schedule] seed ${SEED}, ${RUNS} runs: ${Object.entries(coverage)
      .map(([what, n]) => `${what} ${n}`)
      .join(', ')}`,
  );
  for (const [what, n] of Object.entries(coverage)) expect(n, what).toBeGreaterThan(0);
});
