import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CachedResult, ReplayCache } from './replay-cache.js';

const result = (response: string, expiresAt = 1_000, fingerprint = 'f'): CachedResult => ({
  fingerprint,
  response,
  expiresAt,
});

describe('ReplayCache', () => {
  it('returns what was stored for the same scope and key', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 10_000 });
    cache.set('user:1', 'k', result('{"ok":true}'));
    expect(cache.get('user:1', 'k', 0)).toEqual(result('{"ok":true}'));
  });

  it('keeps scopes apart, even when scope and key could be glued the same way', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 10_000 });
    cache.set('a', 'bc', result('first'));
    cache.set('ab', 'c', result('second'));
    expect(cache.get('a', 'bc', 0)?.response).toBe('first');
    expect(cache.get('ab', 'c', 0)?.response).toBe('second');
    expect(cache.get('user:2', 'bc', 0)).toBeUndefined();
  });

  it('never returns an entry at or after its expiry, and frees its space', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 10_000 });
    cache.set('s', 'k', result('r', 500));
    expect(cache.get('s', 'k', 499)).toBeDefined();
    expect(cache.get('s', 'k', 500)).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
  });

  it('evicts the least recently used entry when full, a read counting as a use', () => {
    const cache = new ReplayCache({ maxEntries: 2, maxBytes: 10_000 });
    cache.set('s', 'a', result('A'));
    cache.set('s', 'b', result('B'));
    cache.get('s', 'a', 0);
    cache.set('s', 'c', result('C'));
    expect(cache.get('s', 'b', 0)).toBeUndefined();
    expect(cache.get('s', 'a', 0)?.response).toBe('A');
    expect(cache.get('s', 'c', 0)?.response).toBe('C');
  });

  it('evicts by size as well as by count', () => {
    const cache = new ReplayCache({ maxEntries: 100, maxBytes: 60 });
    cache.set('s', 'a', result('x'.repeat(20)));
    cache.set('s', 'b', result('y'.repeat(20)));
    expect(cache.size).toBe(2);
    cache.set('s', 'c', result('z'.repeat(20)));
    expect(cache.get('s', 'a', 0)).toBeUndefined();
    expect(cache.size).toBe(2);
    expect(cache.bytes).toBeLessThanOrEqual(60);
  });

  it('does not cache a result larger than the whole budget, and keeps the others', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 50 });
    cache.set('s', 'small', result('s'));
    cache.set('s', 'huge', result('h'.repeat(100)));
    expect(cache.get('s', 'huge', 0)).toBeUndefined();
    expect(cache.get('s', 'small', 0)?.response).toBe('s');
  });

  it('replaces an entry stored again under the same key, accounting its size once', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 10_000 });
    cache.set('s', 'k', result('old'));
    const before = cache.bytes;
    cache.set('s', 'k', result('new'));
    expect(cache.size).toBe(1);
    expect(cache.bytes).toBe(before);
    expect(cache.get('s', 'k', 0)?.response).toBe('new');
  });

  it('is disabled by maxEntries 0 or maxBytes 0', () => {
    for (const opts of [
      { maxEntries: 0, maxBytes: 1000 },
      { maxEntries: 10, maxBytes: 0 },
    ]) {
      const cache = new ReplayCache(opts);
      cache.set('s', 'k', result('r'));
      expect(cache.get('s', 'k', 0)).toBeUndefined();
    }
  });

  it('deletes and clears', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 10_000 });
    cache.set('s', 'a', result('A'));
    cache.set('s', 'b', result('B'));
    expect(cache.delete('s', 'a')).toBe(true);
    expect(cache.delete('s', 'a')).toBe(false);
    cache.clear();
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
  });

  it('rejects limits that are not non-negative integers, naming the option', () => {
    expect(() => new ReplayCache({ maxEntries: -1, maxBytes: 1 })).toThrow(/maxEntries/);
    expect(() => new ReplayCache({ maxEntries: 1, maxBytes: 1.5 })).toThrow(/maxBytes/);
    expect(() => new ReplayCache({ maxEntries: 1, maxBytes: Number.POSITIVE_INFINITY })).not.toThrow();
  });

  it('hands out copies, so a caller cannot change what later replays see', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 10_000 });
    cache.set('s', 'k', result('r'));
    const got = cache.get('s', 'k', 0)!;
    got.response = 'tampered';
    expect(cache.get('s', 'k', 0)?.response).toBe('r');
  });

  it('stays within both limits and agrees with a simple model under any sequence of operations', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('set' as const), key: fc.nat(8), size: fc.nat(40), ttl: fc.nat(20) }),
      fc.record({ kind: fc.constant('get' as const), key: fc.nat(8) }),
      fc.record({ kind: fc.constant('tick' as const), by: fc.nat(5) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.integer({ min: 1, max: 5 }), (ops, maxEntries) => {
        const maxBytes = 120;
        const cache = new ReplayCache({ maxEntries, maxBytes });
        // Model: ordered list of [key, response, expiresAt], least recently used first.
        let model: [string, string, number][] = [];
        let now = 0;
        const sizeOf = (key: string, response: string) => `1:s${key}`.length + 1 + response.length;
        for (const o of ops) {
          if (o.kind === 'tick') {
            now += o.by;
          } else if (o.kind === 'set') {
            const key = String(o.key);
            const response = 'r'.repeat(o.size);
            model = model.filter(([k]) => k !== key);
            cache.set('s', key, result(response, now + o.ttl));
            if (sizeOf(key, response) <= maxBytes) model.push([key, response, now + o.ttl]);
            while (model.length > maxEntries || model.reduce((sum, [k, r]) => sum + sizeOf(k, r), 0) > maxBytes) {
              model.shift();
            }
          } else {
            const key = String(o.key);
            const entry = model.find(([k]) => k === key);
            model = model.filter(([k]) => k !== key);
            const expected = entry && entry[2] > now ? entry[1] : undefined;
            if (entry && expected !== undefined) model.push(entry);
            expect(cache.get('s', key, now)?.response).toBe(expected);
          }
          expect(cache.size).toBeLessThanOrEqual(maxEntries);
          expect(cache.bytes).toBeLessThanOrEqual(maxBytes);
        }
      }),
      { numRuns: 300 },
    );
  });
});
