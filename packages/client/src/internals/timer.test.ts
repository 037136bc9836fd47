import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { MAX_TIMEOUT_MS, startTimer } from './timer.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('startTimer', () => {
  test('a wait past setTimeout’s 2^31−1 ms fires once, after exactly that long, not after 1 ms', async () => {
    const fired = vi.fn();
    startTimer(2 * MAX_TIMEOUT_MS + 5, fired);
    await vi.advanceTimersByTimeAsync(2 * MAX_TIMEOUT_MS + 4);
    expect(fired).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toHaveBeenCalledOnce();
    expect(vi.getTimerCount()).toBe(0);
  });

  test('cancelling between two steps leaves no timer and never fires', async () => {
    const fired = vi.fn();
    const cancel = startTimer(3 * MAX_TIMEOUT_MS, fired);
    await vi.advanceTimersByTimeAsync(MAX_TIMEOUT_MS + 10);
    expect(vi.getTimerCount()).toBe(1);
    cancel();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(3 * MAX_TIMEOUT_MS);
    expect(fired).not.toHaveBeenCalled();
  });

  test('Infinity arms no timer at all', () => {
    const fired = vi.fn();
    startTimer(Number.POSITIVE_INFINITY, fired)();
    expect(vi.getTimerCount()).toBe(0);
  });

  test('waits are armed in whole ms (a fraction dropped, as by setTimeout): the wait planned is the one armed', () => {
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    startTimer(2.9, () => {});
    startTimer(3e-7, () => {});
    expect(setTimeoutSpy.mock.calls.map((call) => call[1])).toEqual([2, 0]);
  });
});
