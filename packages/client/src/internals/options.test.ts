import { describe, expect, test } from 'vitest';
import { resolveOptions } from './options.js';

const resolve = (opts: Record<string, unknown>) => resolveOptions({ procedures: 'all', budget: false, ...opts });

describe('resolveOptions', () => {
  test.each([
    ['baseDelayMs', Number.POSITIVE_INFINITY],
    ['baseDelayMs', -1],
    ['baseDelayMs', Number.NaN],
    ['maxDelayMs', -1],
    ['maxDelayMs', Number.NaN],
    ['maxElapsedMs', -1],
    ['maxElapsedMs', Number.NaN],
    ['maxElapsedMs', Number.NEGATIVE_INFINITY],
    ['attemptTimeoutMs', 0],
    ['attemptTimeoutMs', Number.NaN],
    ['attemptTimeoutMs', '1000'],
    ['maxDelayMs', '1000'],
    ['maxDelayMs', Number.POSITIVE_INFINITY],
  ])('%s: %s fails when the link is created, with a RangeError naming the option', (name, value) => {
    expect(() => resolve({ [name]: value })).toThrow(RangeError);
    expect(() => resolve({ [name]: value })).toThrow(new RegExp(`\`${name}\``));
  });

  test.each(['maxElapsedMs', 'attemptTimeoutMs'])('%s: Infinity is accepted and means no limit', (name) => {
    expect(resolve({ [name]: Number.POSITIVE_INFINITY })[name as 'maxElapsedMs']).toBe(Number.POSITIVE_INFINITY);
  });

  test('durations past setTimeout’s 2^31−1 ms are accepted as they are (the link waits them out in steps)', () => {
    const o = resolve({ maxElapsedMs: 2 ** 40, attemptTimeoutMs: 2 ** 35, baseDelayMs: 2 ** 32, maxDelayMs: 2 ** 33 });
    expect([o.maxElapsedMs, o.attemptTimeoutMs, o.baseDelayMs, o.maxDelayMs]).toEqual([
      2 ** 40,
      2 ** 35,
      2 ** 32,
      2 ** 33,
    ]);
  });
});
