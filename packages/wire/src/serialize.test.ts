import { serializeDictionary, serializeItem } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { serializeKeysDictionary, serializeString } from './serialize.js';

// The encode cases of fixtures/wire-vectors.json run through the client's encoders, which call these.

describe('serializeString', () => {
  it('escapes quotes and backslashes and nothing else', () => {
    expect(serializeString('a"b\\c d')).toBe('"a\\"b\\\\c d"');
  });

  it('writes the same text as the structured-headers package', () => {
    for (const value of ['', 'plain', ' spaced ', 'q"uote', 'back\\slash', '~!@#$%^&*()']) {
      expect(serializeString(value)).toBe(serializeItem(value));
    }
  });

  it('refuses characters a Structured Field String cannot carry, naming them', () => {
    expect(() => serializeString('a\tb')).toThrow(/U\+0009 at index 1/);
    expect(() => serializeString('café')).toThrow(/U\+00E9 at index 3/);
  });
});

describe('serializeKeysDictionary', () => {
  it('orders members by batch index whatever the input order', () => {
    expect(
      serializeKeysDictionary(
        new Map([
          [10, 'c'],
          [2, 'b'],
          [0, 'a'],
        ]),
      ),
    ).toBe('b0="a", b2="b", b10="c"');
  });

  it('writes what structured-headers writes for the same dictionary', () => {
    const keys = { 0: 'k"1', 3: 'k\\2' };
    expect(serializeKeysDictionary(keys)).toBe(serializeDictionary({ b0: 'k"1', b3: 'k\\2' }));
  });

  it('writes an empty dictionary as an empty value', () => {
    expect(serializeKeysDictionary(new Map())).toBe('');
  });

  it('rejects batch indexes that are not non-negative integers', () => {
    expect(() => serializeKeysDictionary(new Map([[-1, 'a']]))).toThrow(RangeError);
    expect(() => serializeKeysDictionary(new Map([[1.5, 'a']]))).toThrow(RangeError);
  });
});
