import { type Operation, TRPCClientError } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { idempotencyLink } from './idempotencyLink.js';
import type { IdempotencyLinkOptions } from './internals/options.js';

// Cases the schedule property test (idempotencyLink.schedule.test.ts) found, each pinned by name.

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(Date.UTC(2026, 0, 1));
});
afterEach(() => {
  vi.useRealTimers();
});

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
  next: (op: Operation) => ReturnType<ReturnType<typeof abortsSynchronously>['next']>,
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
  test('seed 20261203: an attempt timeout whose unsubscribe errors synchronously is retried once, not twice', async () => {
    const downstream = abortsSynchronously();
    const events = call({ attempts: 2, attemptTimeoutMs: 1, maxElapsedMs: 1_000, baseDelayMs: 0 }, downstream.next);
    await vi.runAllTimersAsync();
    expect(downstream.sent).toHaveLength(2);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/AttemptTimeoutError/);
    expect(vi.getTimerCount()).toBe(0);
  });
});
