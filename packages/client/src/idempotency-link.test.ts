import { createTRPCUntypedClient, type Operation, TRPCClientError } from '@trpc/client';
import { type Observer, observable } from '@trpc/server/observable';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { type Answer, ok, scriptedLink } from './__tests__/scripted-link.js';
import { getIdempotencyReason, IdentityChangedError } from './idempotency-error.js';
import { idempotencyHeaders } from './idempotency-headers.js';
import { idempotencyLink } from './idempotency-link.js';
import type { IdempotencyLinkOptions } from './internals/options.js';
import { isOutcomeUnknown } from './is-outcome-unknown.js';
import { retryBudget } from './retry-budget.js';
import type { IdempotencyCallInfo } from './types.js';

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
});
afterEach(() => {
  vi.useRealTimers();
});

function setup(script: (attempt: number, op: Operation) => Answer, opts: Partial<IdempotencyLinkOptions<any>> = {}) {
  const server = scriptedLink(script);
  const client = createTRPCUntypedClient({
    links: [idempotencyLink<any>({ procedures: ['pay'], budget: false, random: () => 0.5, ...opts }), server.link],
  });
  const gaps = () => server.seen.slice(1).map((s, i) => s.at - server.seen[i]!.at);
  return { client, seen: server.seen, gaps };
}

/** Settles a promise without an unhandled rejection while timers run. */
function settle<T>(p: Promise<T>) {
  const out: { value?: T; error?: unknown; done: boolean } = { done: false };
  p.then(
    (value) => Object.assign(out, { value, done: true }),
    (error) => Object.assign(out, { error, done: true }),
  );
  return out;
}

const unavailable: Answer = { status: 503 };

describe('keys', () => {
  test('a guarded mutation carries one generated key on every attempt', async () => {
    const { client, seen } = setup((n) => (n < 3 ? 'network' : ok('paid')));
    const call = settle(client.mutation('pay', { amount: 1 }));
    await vi.runAllTimersAsync();
    expect(call.value).toBe('paid');
    const keys = seen.map((s) => s.op.context.idempotencyKey);
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("the caller's context.idempotencyKey wins over the generator", async () => {
    const generateKey = vi.fn(() => 'generated');
    const { client, seen } = setup(() => ok(), { generateKey });
    await client.mutation('pay', {}, { context: { idempotencyKey: 'form-42' } });
    expect(seen[0]!.op.context.idempotencyKey).toBe('form-42');
    expect(generateKey).not.toHaveBeenCalled();
  });

  test('a caller key that is not visible ASCII fails before anything is sent', async () => {
    const { client, seen } = setup(() => ok());
    await expect(client.mutation('pay', {}, { context: { idempotencyKey: 'has space' } })).rejects.toThrow(
      /visible ASCII/,
    );
    expect(seen).toHaveLength(0);
  });

  test('a key that is not a string (from the caller or the generator) fails before anything is sent', async () => {
    const { client, seen } = setup(() => 'network');
    await expect(client.mutation('pay', {}, { context: { idempotencyKey: 123 as unknown as string } })).rejects.toThrow(
      /visible ASCII/,
    );
    await expect(
      client.mutation('pay', {}, { context: { idempotencyKey: null as unknown as string } }),
    ).rejects.toThrow(/visible ASCII/);
    const generated = setup(() => 'network', { generateKey: () => 42 as unknown as string });
    await expect(generated.client.mutation('pay', {})).rejects.toThrow(/visible ASCII/);
    expect([seen.length, generated.seen.length]).toEqual([0, 0]);
  });

  test('queries and mutations outside `procedures` pass through once, without a key, never retried', async () => {
    const { client, seen } = setup(() => unavailable);
    await expect(client.query('pay', {})).rejects.toThrow();
    await expect(client.mutation('refund', {})).rejects.toThrow();
    expect(seen).toHaveLength(2);
    expect(seen.map((s) => s.op.context.idempotencyKey)).toEqual([undefined, undefined]);
  });
});

describe('keys from the input (inputKeyed)', () => {
  test('an input-keyed mutation sends no key header on any attempt, and is still retried', async () => {
    const { client, seen } = setup((n) => (n < 3 ? 'network' : ok('placed')), {
      procedures: [],
      inputKeyed: ['orders.place'],
    });
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    const call = settle(
      client.mutation(
        'orders.place',
        { orderId: 'o-1' },
        { context: { idempotencyKey: 'given', idempotencyInfo: info } },
      ),
    );
    await vi.runAllTimersAsync();
    expect(call.value).toBe('placed');
    expect(seen).toHaveLength(3);
    for (const { op } of seen) {
      expect(op.input).toEqual({ orderId: 'o-1' });
      expect(idempotencyHeaders({ op })).toEqual({});
    }
    expect(info).toMatchObject({ attempts: 3, settled: true });
  });

  test("inputKeyed is retried under procedures: 'all' as well, and other mutations keep their keys", async () => {
    const { client, seen } = setup((n) => (n === 1 ? 'network' : ok()), {
      procedures: 'all',
      inputKeyed: ['orders.place'],
    });
    const placed = settle(client.mutation('orders.place', { orderId: 'o-2' }));
    await vi.runAllTimersAsync();
    expect(placed.done).toBe(true);
    expect(seen.map(({ op }) => idempotencyHeaders({ op }))).toEqual([{}, {}]);
    await client.mutation('pay', { amount: 1 });
    expect(idempotencyHeaders({ op: seen[2]!.op })).toHaveProperty('Idempotency-Key');
  });

  test('inputKeyed must be an array of paths', () => {
    expect(() => idempotencyLink<any>({ procedures: [], inputKeyed: 'orders.place' as never })).toThrow(/inputKeyed/);
  });
});

describe('backoff', () => {
  test('full jitter waits random() × min(maxDelayMs, baseDelayMs × 2^(n-1)) before retry n', async () => {
    const { client, gaps } = setup(() => 'network', { random: () => 0.5 });
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(call.error).toBeInstanceOf(TRPCClientError);
    expect(gaps()).toEqual([150, 300, 600, 1200]);
  });

  test('full jitter stays below the exponential ceiling for a random() close to 1', async () => {
    const { client, gaps } = setup(() => 'network', { random: () => 0.999 });
    settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    const ceilings = [300, 600, 1200, 2400];
    gaps().forEach((gap, i) => {
      expect(gap).toBeLessThan(ceilings[i]!);
      expect(gap).toBeGreaterThanOrEqual(Math.floor(ceilings[i]! * 0.999));
    });
  });

  test('the ceiling stops growing at maxDelayMs', async () => {
    const { client, gaps } = setup(() => 'network', {
      jitter: 'none',
      attempts: 6,
      baseDelayMs: 1000,
      maxDelayMs: 2500,
      maxElapsedMs: 60_000,
    });
    settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(gaps()).toEqual([1000, 2000, 2500, 2500, 2500]);
  });

  test('attempts bounds the total number of HTTP attempts, the first included', async () => {
    const { client, seen } = setup(() => unavailable, { attempts: 3 });
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(seen).toHaveLength(3);
    expect((call.error as TRPCClientError<any>).data?.httpStatus).toBe(503);
  });
});

describe('Retry-After', () => {
  test('Retry-After in seconds replaces the backoff, unjittered', async () => {
    const { client, gaps } = setup((n) => (n === 1 ? { status: 503, headers: { 'retry-after': '2' } } : ok()), {
      random: () => 0,
    });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(1999);
    expect(call.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(call.value).toBe('ok');
    expect(gaps()).toEqual([2000]);
  });

  test('Retry-After as an HTTP-date waits until that date', async () => {
    const at = new Date(T0 + 3000).toUTCString();
    const { client, gaps } = setup((n) => (n === 1 ? { status: 429, headers: { 'retry-after': at } } : ok()));
    settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(gaps()).toEqual([3000]);
  });

  test('error.data.idempotency.retryAfterMs of an in_progress 409 is the wait', async () => {
    const { client, gaps } = setup((n) => (n === 1 ? { status: 409, reason: 'in_progress', retryAfterMs: 750 } : ok()));
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(call.value).toBe('ok');
    expect(gaps()).toEqual([750]);
  });
});

describe('total-time cap', () => {
  test('a Retry-After past maxElapsedMs fails at once with the last error instead of sleeping', async () => {
    const { client, seen } = setup(() => ({ status: 503, headers: { 'retry-after': '60' } }), { maxElapsedMs: 30_000 });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(0);
    expect(call.done).toBe(true);
    expect((call.error as TRPCClientError<any>).data?.httpStatus).toBe(503);
    expect(seen).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  test('a backoff that would end past maxElapsedMs is not started', async () => {
    const { client, seen } = setup(() => 'network', { jitter: 'none', baseDelayMs: 1000, maxElapsedMs: 2500 });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen).toHaveLength(2);
    expect(call.done).toBe(true); // the next wait (2000 ms) would end at 3000 > 2500
  });
});

describe('time is measured on a monotonic clock', () => {
  test('a wall clock stepped back (NTP, the user) does not stretch maxElapsedMs', async () => {
    const { client, seen } = setup(() => 'hang', {
      attempts: 1000,
      attemptTimeoutMs: 300,
      baseDelayMs: 0,
      maxElapsedMs: 1000,
    });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(150);
    vi.setSystemTime(Date.now() - 60_000);
    await vi.advanceTimersByTimeAsync(1000);
    expect(call.done).toBe(true);
    expect(seen.length).toBeLessThanOrEqual(4);
  });
});

describe('timer values past setTimeout’s 2^31−1 ms', () => {
  const DAY = 86_400_000;

  test('maxElapsedMs and attemptTimeoutMs of Infinity arm no timer: a slow attempt is left to answer', async () => {
    const { client, seen } = setup(() => 'hang', {
      maxElapsedMs: Number.POSITIVE_INFINITY,
      attemptTimeoutMs: Number.POSITIVE_INFINITY,
    });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.aborted).toBe(false);
    expect(call.done).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  test('attemptTimeoutMs 30 days under maxElapsedMs Infinity aborts the attempt after 30 days, not 1 ms', async () => {
    const { client, seen } = setup((n) => (n === 1 ? 'hang' : ok()), {
      maxElapsedMs: Number.POSITIVE_INFINITY,
      attemptTimeoutMs: 30 * DAY,
      random: () => 0,
    });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(30 * DAY - 1);
    expect(seen[0]!.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen[0]!.aborted).toBe(true);
    await vi.runAllTimersAsync();
    expect(call.value).toBe('ok');
  });

  test.each([
    ['a backoff', 'network', { baseDelayMs: 30 * DAY, maxDelayMs: 30 * DAY, jitter: 'none' }],
    ['a Retry-After', { status: 503, headers: { 'retry-after': String(30 * 86_400) } }, {}],
    ['a retryAfterMs', { status: 409, reason: 'in_progress', retryAfterMs: 30 * DAY }, {}],
  ] as const)('%s of 30 days under maxElapsedMs Infinity waits 30 days, not 1 ms', async (_, first, opts) => {
    const { client, gaps } = setup((n) => (n === 1 ? first : ok()), {
      maxElapsedMs: Number.POSITIVE_INFINITY,
      ...opts,
    });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(30 * DAY - 1);
    expect(call.done).toBe(false);
    await vi.runAllTimersAsync();
    expect(call.value).toBe('ok');
    expect(gaps()).toEqual([30 * DAY]);
  });

  test('unsubscribing during a 30-day backoff leaves no timer behind', async () => {
    const server = scriptedLink(() => unavailable);
    const link = idempotencyLink<any>({
      procedures: 'all',
      budget: false,
      maxElapsedMs: Number.POSITIVE_INFINITY,
      baseDelayMs: 30 * DAY,
      maxDelayMs: 30 * DAY,
      jitter: 'none',
    })({});
    const op: Operation = { id: 1, type: 'mutation', path: 'pay', input: {}, context: {}, signal: null };
    const subscription = link({ op, next: (o) => server.link({})({ op: o, next: () => never() }) }).subscribe({});
    await vi.advanceTimersByTimeAsync(20 * DAY);
    expect(vi.getTimerCount()).toBe(1);
    subscription.unsubscribe();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(30 * DAY);
    expect(server.seen).toHaveLength(1);
  });
});

describe('retry policy', () => {
  test.each([
    [400, undefined],
    [401, undefined],
    [403, undefined],
    [404, undefined],
    [422, 'payload_mismatch'],
    [409, undefined],
    [500, 'response_too_large'],
  ])('a %i (reason %s) is not retried', async (status, reason) => {
    const { client, seen } = setup(() => ({ status, ...(reason && { reason }) }));
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(seen).toHaveLength(1);
    expect((call.error as TRPCClientError<any>).data?.httpStatus).toBe(status);
  });

  test.each([408, 429, 500, 502, 503, 504])('a %i is retried', async (status) => {
    const { client, seen } = setup((n) => (n === 1 ? { status } : ok()));
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(call.value).toBe('ok');
    expect(seen).toHaveLength(2);
  });

  test('the idempotency in_progress 409 is retried, a business 409 is not', async () => {
    const inProgress = setup((n) => (n === 1 ? { status: 409, reason: 'in_progress' } : ok()));
    settle(inProgress.client.mutation('pay', {}));
    const business = setup(() => ({ status: 409 }));
    const call = settle(business.client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(inProgress.seen).toHaveLength(2);
    expect(business.seen).toHaveLength(1);
    expect(getIdempotencyReason(call.error)).toBeUndefined();
  });
});

describe('an unknown outcome belongs to the call, not to its last error', () => {
  test.each([401, 403, 404])(
    'a %i after a lost answer ends the call outcome-unknown: it says nothing of the key',
    async (status) => {
      const { client } = setup((n) => (n === 1 ? 'network' : { status }));
      const call = settle(client.mutation('pay', {}));
      await vi.runAllTimersAsync();
      expect(isOutcomeUnknown(call.error)).toBe(true);
    },
  );

  test("the key's own answer after a lost one is definitive; a refusal with nothing lost before it too", async () => {
    const stored = setup((n) => (n === 1 ? 'network' : { status: 402, keyAnswer: true }));
    const declined = settle(stored.client.mutation('pay', {}));
    const refused = setup(() => ({ status: 401 }));
    const unauthorized = settle(refused.client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect([isOutcomeUnknown(declined.error), isOutcomeUnknown(unauthorized.error)]).toEqual([false, false]);
  });

  test("the key's stored answer is never retried, whatever its status (a stored 429 replays as a 429)", async () => {
    const { client, seen } = setup(() => ({ status: 429, keyAnswer: true }));
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect([seen.length, isOutcomeUnknown(call.error)]).toEqual([1, false]);
  });

  test('a changed identity stops the retry: nothing more is sent and the outcome is unknown', async () => {
    let user = 'alice';
    const { client, seen } = setup(
      () => {
        user = 'bob';
        return 'network';
      },
      { identity: () => user },
    );
    const call = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(seen).toHaveLength(1);
    expect((call.error as Error).cause).toBeInstanceOf(IdentityChangedError);
    expect(isOutcomeUnknown(call.error)).toBe(true);
  });

  // Under its own identity again, the same "try again" is sent.
  test('a "try again" with a key left unknown under another identity sends nothing', async () => {
    let user = 'alice';
    const { client, seen } = setup(
      (n) => {
        if (n > 1) return ok('replayed');
        user = 'bob';
        return 'network';
      },
      { identity: () => user },
    );
    const first = settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    const key = seen[0]!.op.context.idempotencyKey;
    expect(isOutcomeUnknown(first.error)).toBe(true);

    const again = settle(client.mutation('pay', {}, { context: { idempotencyKey: key } }));
    await vi.runAllTimersAsync();
    expect(seen).toHaveLength(1);
    expect((again.error as Error).cause).toBeInstanceOf(IdentityChangedError);
    expect(isOutcomeUnknown(again.error)).toBe(true);

    user = 'alice';
    const back = settle(client.mutation('pay', {}, { context: { idempotencyKey: key } }));
    await vi.runAllTimersAsync();
    expect([back.value, seen.length]).toEqual(['replayed', 2]);
  });
});

describe('attempt timeout', () => {
  test('a hung attempt is aborted after attemptTimeoutMs and retried with the same key', async () => {
    const { client, seen } = setup((n) => (n === 1 ? 'hang' : ok('late')), { attemptTimeoutMs: 1000, random: () => 0 });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(999);
    expect(seen).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen[0]!.aborted).toBe(true);
    await vi.runAllTimersAsync();
    expect(call.value).toBe('late');
    expect(seen[1]!.op.context.idempotencyKey).toBe(seen[0]!.op.context.idempotencyKey);
  });
});

describe('attempt timeout within the total-time cap', () => {
  test('the last attempt only gets the time left of maxElapsedMs', async () => {
    const { client, seen } = setup((n) => (n === 1 ? 'network' : 'hang'), {
      attemptTimeoutMs: 10_000,
      maxElapsedMs: 3_000,
      jitter: 'none',
      baseDelayMs: 1_000,
    });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(seen).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1_999);
    expect(call.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen[1]!.aborted).toBe(true);
    expect(call.done).toBe(true); // the next backoff (2 s) would end past 3 s
    expect((call.error as Error).cause).toMatchObject({ name: 'AttemptTimeoutError' });
  });
});

describe('which attempt may end a call', () => {
  /**
   * A downstream whose attempts answer only when the test says so, and keep answering after an unsubscribe
   * (as an httpBatchLink request does while a batch sibling still waits for it).
   */
  function manual() {
    const attempts: { observer: Observer<any, any>; unsubscribed: boolean }[] = [];
    const next = (_op: Operation) =>
      observable<any, any>((observer) => {
        const attempt = { observer, unsubscribed: false };
        attempts.push(attempt);
        return () => {
          attempt.unsubscribed = true;
        };
      });
    const result = (data: unknown) => ({ result: { type: 'data', data }, context: {} });
    return { attempts, next, result };
  }

  function start(downstream: ReturnType<typeof manual>, opts: Partial<IdempotencyLinkOptions<any>> = {}) {
    const link = idempotencyLink<any>({
      procedures: 'all',
      budget: false,
      attemptTimeoutMs: 1_000,
      baseDelayMs: 500,
      jitter: 'none',
      ...opts,
    })({});
    const op: Operation = { id: 1, type: 'mutation', path: 'pay', input: {}, context: {}, signal: null };
    const events: unknown[] = [];
    link({ op, next: downstream.next }).subscribe({
      next: (envelope) => events.push(envelope.result.data),
      error: (error) => events.push(error),
      complete: () => events.push('complete'),
    });
    return events;
  }

  test("a timed-out attempt's late result, during the retry's wait, is the call's; nothing more is sent", async () => {
    const downstream = manual();
    const events = start(downstream);
    await vi.advanceTimersByTimeAsync(1_000); // attempt 1 times out; the retry waits 500 ms
    expect(downstream.attempts[0]!.unsubscribed).toBe(true);
    downstream.attempts[0]!.observer.next(downstream.result('charged'));
    downstream.attempts[0]!.observer.complete();
    expect(events).toEqual(['charged', 'complete']);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(downstream.attempts).toHaveLength(1);
  });

  test("a timed-out attempt's late result while its retry runs ends the call and lets go of the retry", async () => {
    const downstream = manual();
    const events = start(downstream);
    await vi.advanceTimersByTimeAsync(1_500); // attempt 2 is running
    expect(downstream.attempts).toHaveLength(2);
    downstream.attempts[0]!.observer.next(downstream.result('charged'));
    expect(events).toEqual(['charged', 'complete']);
    expect(downstream.attempts[1]!.unsubscribed).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a timed-out attempt's late complete or error changes nothing: the current attempt decides", async () => {
    const downstream = manual();
    const events = start(downstream);
    await vi.advanceTimersByTimeAsync(1_000);
    downstream.attempts[0]!.observer.complete();
    await vi.advanceTimersByTimeAsync(500); // the retry is still sent
    expect(downstream.attempts).toHaveLength(2);
    downstream.attempts[0]!.observer.error(TRPCClientError.from(new Error('late')));
    expect(events).toEqual([]);
    downstream.attempts[1]!.observer.next(downstream.result('replayed'));
    expect(events).toEqual(['replayed', 'complete']);
  });

  test('the current attempt completing without a result fails the call, without a retry', async () => {
    const downstream = manual();
    const events = start(downstream);
    downstream.attempts[0]!.observer.complete();
    expect(events).toEqual([expect.objectContaining({ message: expect.stringMatching(/without a result/) })]);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(downstream.attempts).toHaveLength(1);
  });
});

describe('retry budget', () => {
  test('retries stop once the shared budget is spent; first attempts still go out', async () => {
    const budget = retryBudget({ minRetries: 2, retryRatio: 0, windowMs: 10_000 });
    const { client, seen } = setup(() => 'network', { budget, attempts: 3 });
    const calls = [1, 2, 3].map(() => settle(client.mutation('pay', {})));
    await vi.runAllTimersAsync();
    expect(calls.every((c) => c.error instanceof TRPCClientError)).toBe(true);
    expect(seen).toHaveLength(3 + 2);
  });

  test('a call whose retry the spent budget cannot fund fails at once, not after sleeping a backoff', async () => {
    const budget = retryBudget({ minRetries: 0, retryRatio: 0 });
    const { client, seen } = setup(() => unavailable, { budget, random: () => 1 });
    const call = settle(client.mutation('pay', {}));
    await vi.advanceTimersByTimeAsync(0);
    expect(call.done).toBe(true);
    expect(seen).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  test('the budget refills as its window slides', async () => {
    const budget = retryBudget({ minRetries: 1, retryRatio: 0, windowMs: 10_000 });
    const { client, seen } = setup(() => 'network', { budget, attempts: 2 });
    settle(client.mutation('pay', {}));
    settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(seen).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(10_000);
    settle(client.mutation('pay', {}));
    await vi.runAllTimersAsync();
    expect(seen).toHaveLength(5);
  });
});

describe('cancellation', () => {
  test('aborting during a backoff fails the call at once and sends nothing more', async () => {
    const { client, seen } = setup(() => unavailable, { random: () => 1 });
    const ac = new AbortController();
    const call = settle(client.mutation('pay', {}, { signal: ac.signal }));
    await vi.advanceTimersByTimeAsync(100);
    expect(seen).toHaveLength(1);
    ac.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(call.done).toBe(true);
    expect((call.error as Error).cause).toMatchObject({ name: 'AbortError' });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(seen).toHaveLength(1);
  });

  test('aborting a running attempt fails the call at once, aborts the request and retries nothing', async () => {
    const { client, seen } = setup(() => 'hang');
    const ac = new AbortController();
    const call = settle(client.mutation('pay', {}, { signal: ac.signal }));
    await vi.advanceTimersByTimeAsync(100);
    ac.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(call.done).toBe(true);
    expect(seen[0]!.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(seen).toHaveLength(1);
  });

  test('an already aborted signal sends nothing', async () => {
    const { client, seen } = setup(() => ok());
    await expect(client.mutation('pay', {}, { signal: AbortSignal.abort() })).rejects.toThrow();
    expect(seen).toHaveLength(0);
  });

  test('unsubscribing during a backoff clears its timer and sends nothing more', async () => {
    const server = scriptedLink(() => unavailable);
    // A fixed draw: a random one below 1 ms retried within the first millisecond, before the unsubscribe (a CI flake).
    const link = idempotencyLink<any>({ procedures: 'all', budget: false, random: () => 0.5 })({});
    const op: Operation = { id: 1, type: 'mutation', path: 'pay', input: {}, context: {}, signal: null };
    const subscription = link({ op, next: (o) => server.link({})({ op: o, next: () => never() }) }).subscribe({});
    await vi.advanceTimersByTimeAsync(1);
    expect(vi.getTimerCount()).toBe(1);
    subscription.unsubscribe();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(server.seen).toHaveLength(1);
  });
});

describe('hooks and per-call info', () => {
  test('onRetry reports each retry; context.idempotencyInfo and onSettled report attempts and the replay', async () => {
    const onRetry = vi.fn();
    const onSettled = vi.fn();
    const { client } = setup(
      (n) => (n === 1 ? 'network' : { data: 'paid', headers: { 'idempotent-replayed': 'true' } }),
      { onRetry, onSettled },
    );
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    const call = settle(client.mutation('pay', {}, { context: { idempotencyInfo: info } }));
    expect(info.key).toMatch(/^[0-9a-f-]{36}$/); // known as soon as the call starts
    await vi.runAllTimersAsync();
    expect(call.value).toBe('paid');
    expect(info).toEqual({ key: info.key, attempts: 2, replayed: true, settled: true });
    expect(onRetry).toHaveBeenCalledTimes(1);
    expect(onRetry.mock.calls[0]![0]).toMatchObject({ attempt: 2, delayMs: 150, key: info.key });
    expect(onSettled).toHaveBeenCalledWith(expect.objectContaining({ attempts: 2, replayed: true, key: info.key }));
  });

  test('a replayed stored error is flagged too', async () => {
    const { client } = setup(() => ({ status: 409, headers: { 'idempotent-replayed': 'true' } }));
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    await expect(client.mutation('pay', {}, { context: { idempotencyInfo: info } })).rejects.toThrow();
    expect(info).toMatchObject({ attempts: 1, replayed: true, settled: true });
  });

  test('the call is settled before its result is passed on: a caller that unsubscribes at once sees it', async () => {
    const server = scriptedLink(() => ok());
    const onSettled = vi.fn();
    const link = idempotencyLink<any>({ procedures: 'all', onSettled })({});
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    const op: Operation = {
      id: 1,
      type: 'mutation',
      path: 'pay',
      input: {},
      context: { idempotencyInfo: info },
      signal: null,
    };
    const subscription = link({ op, next: (o) => server.link({})({ op: o, next: () => never() }) }).subscribe({
      next: () => subscription.unsubscribe(),
    });
    await vi.advanceTimersByTimeAsync(1);
    expect(info.settled).toBe(true);
    expect(onSettled).toHaveBeenCalledOnce();
  });

  test('a first-time execution is not flagged as replayed', async () => {
    const { client } = setup(() => ok());
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    await client.mutation('pay', {}, { context: { idempotencyInfo: info } });
    expect(info).toMatchObject({ attempts: 1, replayed: false, settled: true });
  });
});

function never(): never {
  throw new Error('the scripted link terminates the chain');
}
