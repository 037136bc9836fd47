import { describe, expect, test } from 'vitest';
import { retryBudget } from './retry-budget.js';

function clock() {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const take = (budget: ReturnType<typeof retryBudget>, n: number) =>
  Array.from({ length: n }, () => budget.tryAcquireRetry()).filter(Boolean).length;

describe('retryBudget', () => {
  test('without answers it allows minRetries per window, then refuses', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now });
    expect(take(budget, 50)).toBe(10);
  });

  test('canRetry tells whether a retry is available without taking it', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now, minRetries: 1 });
    expect(budget.canRetry()).toBe(true);
    expect(budget.canRetry()).toBe(true);
    expect(budget.tryAcquireRetry()).toBe(true);
    expect(budget.canRetry()).toBe(false);
  });

  test('each answered attempt buys retryRatio retries', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now, minRetries: 0, retryRatio: 0.5 });
    for (let i = 0; i < 70; i++) budget.recordAnswered();
    expect(take(budget, 100)).toBe(35);
  });

  test('spent retries come back once they slide out of the window', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now, minRetries: 10, windowMs: 10_000 });
    expect(take(budget, 20)).toBe(10);
    c.advance(5_000);
    expect(take(budget, 20)).toBe(0);
    c.advance(5_000);
    expect(take(budget, 20)).toBe(10);
  });

  test('answers older than the window stop funding retries', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now, minRetries: 0, retryRatio: 1, windowMs: 10_000 });
    for (let i = 0; i < 5; i++) budget.recordAnswered();
    c.advance(10_000);
    expect(take(budget, 5)).toBe(0);
  });

  test('a long idle gap clears the whole window', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now, minRetries: 2 });
    expect(take(budget, 5)).toBe(2);
    c.advance(3_600_000);
    expect(take(budget, 5)).toBe(2);
  });

  test('bad options fail early, naming the option', () => {
    expect(() => retryBudget({ windowMs: 0 })).toThrow(/windowMs/);
    expect(() => retryBudget({ retryRatio: -1 })).toThrow(/retryRatio/);
  });

  test('a clock stepped back does not block retries past windowMs', () => {
    const c = clock();
    const budget = retryBudget({ now: c.now, minRetries: 2, retryRatio: 0, windowMs: 10_000 });
    expect(take(budget, 5)).toBe(2);
    c.advance(-60_000); // a wall clock corrected by a minute
    c.advance(10_000);
    expect(take(budget, 5)).toBe(2);
  });
});
