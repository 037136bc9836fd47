import { describe, expect, it } from 'vitest';
import { IdempotencyError } from '../errors/idempotency-error.js';
import { headerOf, loadWireVectors } from './__tests__/wire-vectors.js';
import { parseIdempotencyKey, parseIdempotencyKeys, validateKey } from './parse-idempotency-key.js';

const vectors = loadWireVectors();

function reasonOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    if (error instanceof IdempotencyError) return error.reason;
    throw error;
  }
}

describe('shared wire vectors', () => {
  it('has cases to run (the file is the real one)', () => {
    expect(vectors.key.length).toBeGreaterThanOrEqual(10);
    expect(vectors.batch.length).toBeGreaterThanOrEqual(5);
  });

  for (const vector of vectors.key) {
    const header = headerOf(vector);
    const shown = header.length > 40 ? `${header.slice(0, 20)}…(${header.length})` : header;
    const title = `Idempotency-Key ${JSON.stringify(shown)}${vector.note ? ` (${vector.note})` : ''}`;
    if (vector.error) {
      it(`${title} is rejected as ${vector.error}`, () => {
        expect(reasonOf(() => parseIdempotencyKey(header))).toBe(vector.error);
      });
    } else {
      it(`${title} reads as its key`, () => {
        const key = parseIdempotencyKey(header);
        if (vector.key !== undefined) expect(key).toBe(vector.key);
        if (vector.key_length !== undefined) expect(key).toHaveLength(vector.key_length);
      });
    }
  }

  for (const vector of vectors.batch) {
    const title = `Idempotency-Keys ${JSON.stringify(vector.header)}${vector.note ? ` (${vector.note})` : ''}`;
    if (vector.error) {
      it(`${title} is rejected as ${vector.error}`, () => {
        expect(reasonOf(() => parseIdempotencyKeys(vector.header))).toBe(vector.error);
      });
    } else {
      it(`${title} maps batch indexes to keys`, () => {
        const expected = new Map(Object.entries(vector.keys ?? {}).map(([i, k]) => [Number(i), k]));
        expect(parseIdempotencyKeys(vector.header)).toEqual(expected);
      });
    }
  }
});

describe('parseIdempotencyKey', () => {
  it('ignores the parameters of an Item String', () => {
    expect(parseIdempotencyKey('"abc";a=1;b="x";c;d=?0;e=tok/en;f=:YWJj:;g=-1.5;h=@1659578233;i=%"f%c3%bc"')).toBe(
      'abc',
    );
  });

  it('allows spaces after the semicolon of a parameter but not before it', () => {
    expect(parseIdempotencyKey('"abc"; a=1')).toBe('abc');
    expect(reasonOf(() => parseIdempotencyKey('"abc" ;a=1'))).toBe('key_invalid');
  });

  it('rejects malformed parameters instead of ignoring them', () => {
    for (const header of ['"abc";', '"abc";A=1', '"abc";a=', '"abc";a=1.2345', '"abc";a="x', '"abc";a=?2']) {
      expect(
        reasonOf(() => parseIdempotencyKey(header)),
        header,
      ).toBe('key_invalid');
    }
  });

  it('trims spaces and tabs around the value, quoted or raw', () => {
    expect(parseIdempotencyKey('\t "abc" \t')).toBe('abc');
    expect(parseIdempotencyKey(' \tabc\t ')).toBe('abc');
  });

  it('keeps a raw value exactly, quotes and backslashes inside it included', () => {
    expect(parseIdempotencyKey('ab"c\\d')).toBe('ab"c\\d');
    expect(parseIdempotencyKey('token-like_key.1')).toBe('token-like_key.1');
  });

  it('rejects an empty or whitespace-only value as key_invalid', () => {
    expect(reasonOf(() => parseIdempotencyKey(''))).toBe('key_invalid');
    expect(reasonOf(() => parseIdempotencyKey('   '))).toBe('key_invalid');
  });

  it('counts the 255-character limit after unescaping', () => {
    const key = `${'\\"'.repeat(127)}k`; // 127 escaped quotes + 1 = 128 characters once unescaped
    expect(parseIdempotencyKey(`"${key}"`)).toHaveLength(128);
    expect(parseIdempotencyKey(`"${'\\\\'.repeat(255)}"`)).toBe('\\'.repeat(255));
    expect(reasonOf(() => parseIdempotencyKey(`"${'\\\\'.repeat(256)}"`))).toBe('key_invalid');
  });

  it('explains what is wrong and what to send instead', () => {
    try {
      parseIdempotencyKey('"ab c"');
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(IdempotencyError);
      expect((error as Error).message).toMatch(/U\+0020 at position 3/);
      expect((error as Error).message).toMatch(/1-255 visible ASCII/);
    }
    expect(() => parseIdempotencyKey('"abc')).toThrow(/not a valid Structured Field: unterminated string/);
  });
});

describe('parseIdempotencyKeys', () => {
  it('reads an empty value as an empty dictionary', () => {
    expect(parseIdempotencyKeys('')).toEqual(new Map());
    expect(parseIdempotencyKeys('  ')).toEqual(new Map());
  });

  it('accepts spaces and tabs around commas, and parameters on values', () => {
    expect(parseIdempotencyKeys('b0="a";x=1 ,\tb1="b";y ,  b10="c"')).toEqual(
      new Map([
        [0, 'a'],
        [1, 'b'],
        [10, 'c'],
      ]),
    );
  });

  it('rejects a trailing comma, an empty member and whitespace before "="', () => {
    for (const header of ['b0="a",', 'b0="a", ,b1="b"', 'b0 ="a"', 'b0= "a"', ',b0="a"']) {
      expect(
        reasonOf(() => parseIdempotencyKeys(header)),
        header,
      ).toBe('key_invalid');
    }
  });

  it('rejects values that are not Strings: tokens, numbers, booleans, inner lists, bare names', () => {
    for (const header of ['b0=tok', 'b0=1', 'b0=?1', 'b0=("a")', 'b0', 'b0;x=1']) {
      expect(
        reasonOf(() => parseIdempotencyKeys(header)),
        header,
      ).toBe('key_invalid');
    }
  });

  it('rejects member names that are not b<batchIndex>', () => {
    for (const header of ['c0="a"', 'b="a"', 'b01="a"', 'b-1="a"', 'B0="a"', 'b0x="a"', 'b99999999999999999="a"']) {
      expect(
        reasonOf(() => parseIdempotencyKeys(header)),
        header,
      ).toBe('key_invalid');
    }
  });

  it('rejects the whole header when any value is an invalid key, naming the member', () => {
    expect(() => parseIdempotencyKeys('b0="ok", b3="bad key"')).toThrow(/member b3 is invalid: it contains U\+0020/);
  });

  it('keeps only the last of duplicate members, wherever they are', () => {
    expect(parseIdempotencyKeys('b1="x", b0="z", b1="y"')).toEqual(
      new Map([
        [1, 'y'],
        [0, 'z'],
      ]),
    );
  });
});

describe('validateKey', () => {
  it('returns a valid key unchanged', () => {
    expect(validateKey('!~')).toBe('!~');
    expect(validateKey('k'.repeat(255))).toBe('k'.repeat(255));
  });

  it('rejects empty, too long, control, space, DEL and non-ASCII keys as key_invalid', () => {
    for (const key of ['', 'k'.repeat(256), 'a\u0000', 'a b', 'a\u007f', 'é', '\u{1F600}']) {
      expect(
        reasonOf(() => validateKey(key)),
        JSON.stringify(key),
      ).toBe('key_invalid');
    }
  });

  it('rejects a non-string from the key option with a message naming the type', () => {
    expect(() => validateKey(42 as unknown as string)).toThrow(/must be a string, got number/);
  });
});
