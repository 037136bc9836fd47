import { describe, expect, test } from 'vitest';
import { generateKey, uuidFrom } from './generate-key.js';

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('generateKey', () => {
  test('makes a fresh v4 UUID each time', () => {
    const a = generateKey();
    expect(a).toMatch(V4);
    expect(generateKey()).not.toBe(a);
  });

  test('falls back to getRandomValues where randomUUID is missing (plain-HTTP pages)', () => {
    const getRandomValues = <T extends ArrayBufferView | null>(array: T) => crypto.getRandomValues(array as any) as T;
    const keys = new Set(Array.from({ length: 100 }, () => uuidFrom({ getRandomValues })));
    expect(keys.size).toBe(100);
    for (const key of keys) expect(key).toMatch(V4);
  });

  test('sets the version and variant bits whatever the random bytes', () => {
    const allOnes = <T extends ArrayBufferView | null>(array: T) => {
      (array as unknown as Uint8Array).fill(0xff);
      return array;
    };
    expect(uuidFrom({ getRandomValues: allOnes })).toBe('ffffffff-ffff-4fff-bfff-ffffffffffff');
  });

  test('without any Web Crypto it says what to do', () => {
    expect(() => uuidFrom(undefined)).toThrow(/generateKey/);
  });
});
