import { describe, expect, test } from 'vitest';
import { parseRetryAfter } from './retry-after.js';

const now = Date.UTC(2026, 0, 1, 12, 0, 0);

describe('parseRetryAfter', () => {
  test('delay-seconds become milliseconds', () => {
    expect(parseRetryAfter('1', now)).toBe(1000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('0', now)).toBe(0);
  });

  test('an HTTP-date becomes the time left until it', () => {
    expect(parseRetryAfter(new Date(now + 5000).toUTCString(), now)).toBe(5000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 12:00:30 GMT', now)).toBe(30_000);
  });

  test("HTTP-date's obsolete forms a recipient must accept (RFC 850, asctime) are read too", () => {
    expect(parseRetryAfter('Thursday, 01-Jan-26 12:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Thu Jan  1 12:00:30 2026', now)).toBe(30_000);
  });

  test('a date that does not exist, or whose weekday is not its own, is unreadable, never rolled over', () => {
    for (const value of [
      'Sun, 31 Feb 2100 00:00:00 GMT',
      'Mon, 29 Feb 2100 00:00:00 GMT',
      'Tue, 31 Apr 1990 00:00:00 GMT',
      'Thu, 01 Jan 2026 24:00:00 GMT',
      'Thu, 01 Jan 2026 12:60:00 GMT',
      'Fri, 01 Jan 2026 12:00:30 GMT',
      'Friday, 01-Jan-26 12:00:30 GMT',
      'Fri Jan  1 12:00:30 2026',
    ]) {
      expect(parseRetryAfter(value, now), value).toBeUndefined();
    }
    expect(parseRetryAfter('Tue, 29 Feb 2028 00:00:00 GMT', now)).toBeGreaterThan(0);
  });

  test('a date that is not an HTTP-date (ISO 8601, a local time, no zone) is unreadable, never guessed at', () => {
    for (const value of ['2026-01-01T12:00:30Z', '2026-01-01T12:00:30', 'Thu, 01 Jan 2026 12:00:30', 'Jan 1 2026']) {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    }
  });

  test('a date in the past means now', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 11:00:00 GMT', now)).toBe(0);
  });

  test('absent, negative, fractional or unreadable values are ignored', () => {
    for (const value of [null, undefined, '', '-1', '1.5', 'soon', 'in 2 days']) {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    }
  });
});

describe('parseRetryAfter beyond finite numbers', () => {
  test('delay-seconds too long to be a finite number of ms are unreadable, not an endless (or 1 ms) wait', () => {
    expect(parseRetryAfter('9'.repeat(400), now)).toBeUndefined();
  });

  test('a long but finite wait is kept whole, past setTimeout’s 2^31−1 ms', () => {
    expect(parseRetryAfter('2592000', now)).toBe(2_592_000_000);
  });
});
