import { type Operation, TRPCClientError } from '@trpc/client';
import { type Observable, observable } from '@trpc/server/observable';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { ok, scriptedLink } from './__tests__/scripted-link.js';
import { idempotencyLink } from './idempotency-link.js';
import type { IdempotencyLinkOptions } from './internals/options.js';

// Cases the schedule property test (idempotency-link.schedule.test.ts) found, each pinned by name.

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(Date.UTC(2026, 0, 1));
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** User code that throws. */
const boom = new Error('user code that throws');
const throws: () => never = () => {
  throw boom;
};

/**
 * A downstream that never answers on its own and, like some links do, errors synchronously from inside its
 * unsubscribe (an AbortError). Counts what it was sent.
 */
function abortsSynchronously() {
  const sent: Operation[] = [];
  const next = (op: Operation) =>
    observable<never, TRPCClientError<any>>((observer) => {
      sent.push(op);
      return () => observer.error(TRPCClientError.from(new DOMException('aborted', 'AbortError')));
    });
  return { sent, next };
}

function call(
  opts: Partial<IdempotencyLinkOptions<any>>,
  next: (op: Operation) => Observable<any, TRPCClientError<any>>,
) {
  const link = idempotencyLink<any>({ procedures: 'all', budget: false, random: () => 0, ...opts })({});
  const op: Operation = { id: 1, type: 'mutation', path: 'pay', input: {}, context: {}, signal: null };
  const events: string[] = [];
  link({ op, next }).subscribe({
    next: () => events.push('next'),
    error: (e) => events.push(`error ${String((e as Error).cause ?? e)}`),
    complete: () => events.push('complete'),
  });
  return events;
}

describe('found by the schedule property test', () => {
  test('seed 20261203: an attempt timed out whose unsubscribe throws at once is retried once, not twice', async () => {
    const downstream = abortsSynchronously();
    const events = call({ attempts: 2, attemptTimeoutMs: 1, maxElapsedMs: 1_000, baseDelayMs: 0 }, downstream.next);
    await vi.runAllTimersAsync();
    expect(downstream.sent).toHaveLength(2);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/AttemptTimeoutError/);
    expect(vi.getTimerCount()).toBe(0);
  });

  describe('seed 20261203: a hook that throws changes nothing about the call; the error goes to console.error', () => {
    test('a throwing onSettled after a success: the caller still gets the value', async () => {
      const consoleError = vi.spyOn(console, 'error').mockImplementation(() => {});
      const server = scriptedLink(() => ok('paid'));
      const events = call({ onSettled: throws }, (op) => server.link({})({ op, next: () => endOfChain() }));
      await vi.runAllTimersAsync();
      expect(events).toEqual(['next', 'complete']);
      expect(consoleError).toHaveBeenCalledWith(expect.stringContaining('onSettled'), boom);
    });

    test('a throwing onSettled on abort: abort() does not throw and the caller gets its AbortError', async () => {
      vi.spyOn(console, 'error').mockImplementation(() => {});
      const server = scriptedLink(() => 'hang');
      const ac = new AbortController();
      const link = idempotencyLink<any>({ procedures: 'all', budget: false, onSettled: throws })({});
      const op: Operation = { id: 1, type: 'mutation', path: 'pay', input: {}, context: {}, signal: ac.signal };
      const events: string[] = [];
      link({ op, next: (o) => server.link({})({ op: o, next: () => endOfChain() }) }).subscribe({
        error: (e) => events.push(String((e as Error).cause)),
      });
      expect(() => ac.abort()).not.toThrow();
      expect(events).toEqual([expect.stringMatching(/AbortError/)]);
    });

    test('a throwing onRetry: the retry is still sent and the call ends with its answer', async () => {
      const consoleError = vi.spyOn(console, 'error').mockImplementation(() => {});
      const server = scriptedLink((n) => (n === 1 ? 'network' : ok('paid')));
      const events = call({ onRetry: throws }, (op) => server.link({})({ op, next: () => endOfChain() }));
      await vi.runAllTimersAsync();
      expect(server.seen).toHaveLength(2);
      expect(events).toEqual(['next', 'complete']);
      expect(consoleError).toHaveBeenCalledWith(expect.stringContaining('onRetry'), boom);
      expect(vi.getTimerCount()).toBe(0);
    });
  });

  describe('seed 20261203: a random source or a budget that throws fails the call with its error, not hanging', () => {
    const cases: [string, Partial<IdempotencyLinkOptions<any>>][] = [
      ['random', { random: throws }],
      ['budget.canRetry', { budget: { recordAnswered() {}, canRetry: throws, tryAcquireRetry: () => true } }],
      ['budget.tryAcquireRetry', { budget: { recordAnswered() {}, canRetry: () => true, tryAcquireRetry: throws } }],
    ];
    test.each(cases)('%s', async (_, opts) => {
      const server = scriptedLink(() => ({ status: 503 }));
      const events = call(opts, (op) => server.link({})({ op, next: () => endOfChain() }));
      await vi.runAllTimersAsync();
      expect(events).toEqual([`error ${String(boom)}`]);
      expect(server.seen).toHaveLength(1);
      expect(vi.getTimerCount()).toBe(0);
    });
  });

  // Its backoff fires at maxElapsedMs (a 0 ms timer waits 1 ms).
  test('seed 20261203: a retry due at maxElapsedMs is not sent; the call fails with its last error', async () => {
    const server = scriptedLink(() => 'hang');
    const events = call({ attempts: 2, attemptTimeoutMs: 1, maxElapsedMs: 1, baseDelayMs: 0 }, (op) =>
      server.link({})({ op, next: () => endOfChain() }),
    );
    await vi.runAllTimersAsync();
    expect(server.seen).toHaveLength(1);
    expect(events).toEqual([expect.stringMatching(/AttemptTimeoutError/)]);
  });
});

function endOfChain(): never {
  throw new Error('the scripted link terminates the chain');
}
