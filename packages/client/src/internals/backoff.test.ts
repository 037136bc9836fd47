import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { backoffDelay, type Jitter } from './backoff.js';

const base = { baseDelayMs: 300, maxDelayMs: 10_000, previousDelayMs: undefined };
const ceiling = (retry: number) => Math.min(10_000, 300 * 2 ** (retry - 1));

describe('backoffDelay', () => {
  test('full jitter draws in [0, min(maxDelayMs, baseDelayMs × 2^(n-1))) for every retry', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (retry, r) => {
          const delay = backoffDelay({ ...base, retry, jitter: 'full', random: () => r });
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThan(ceiling(retry));
          expect(delay).toBeCloseTo(r * ceiling(retry), 6);
        },
      ),
    );
  });

  test('the ceiling doubles from baseDelayMs and stops at maxDelayMs', () => {
    const none = (retry: number) => backoffDelay({ ...base, retry, jitter: 'none', random: () => 0.5 });
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(none)).toEqual([300, 600, 1200, 2400, 4800, 9600, 10_000, 10_000]);
  });

  test('equal jitter keeps at least half the ceiling', () => {
    expect(backoffDelay({ ...base, retry: 3, jitter: 'equal', random: () => 0 })).toBe(600);
    expect(backoffDelay({ ...base, retry: 3, jitter: 'equal', random: () => 0.999 })).toBeCloseTo(1199.4, 6);
  });

  test('decorrelated jitter grows from the previous wait, between base and 3× it, capped', () => {
    const next = (previousDelayMs: number | undefined, r: number) =>
      backoffDelay({ ...base, previousDelayMs, retry: 9, jitter: 'decorrelated' as Jitter, random: () => r });
    expect(next(undefined, 0)).toBe(300);
    expect(next(undefined, 1)).toBe(900);
    expect(next(1000, 1)).toBe(3000);
    expect(next(8000, 1)).toBe(10_000);
  });
});

describe('backoffDelay with a random source out of [0, 1)', () => {
  test.each([
    ['full', 2],
    ['full', -1],
    ['full', Number.NaN],
    ['equal', Number.NaN],
    ['decorrelated', Number.NaN],
    ['decorrelated', 5],
  ] as const)('%s jitter with random() = %s stays a finite wait within [0, the ceiling of retry 3]', (jitter, r) => {
    const delay = backoffDelay({ ...base, retry: 3, jitter, random: () => r });
    expect(Number.isFinite(delay)).toBe(true);
    expect(delay).toBeGreaterThanOrEqual(0);
    expect(delay).toBeLessThanOrEqual(ceiling(3));
  });
});
