import { StructuredFieldReader, serializeKeyHeader, serializeKeysDictionary } from '@trpc-idempotency/wire';
import fc from 'fast-check';
import { parseDictionary, parseItem, serializeDictionary, serializeItem, Token } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { IdempotencyError } from '../errors/idempotency-error.js';
import { parseIdempotencyKey, parseIdempotencyKeys, validateKey } from './parse-idempotency-key.js';

// Differential tests: the structured-headers package (RFC 8941/9651) is the reference for every parse.

const visibleChar = fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c));
const validKey = fc.string({ unit: visibleChar, minLength: 1, maxLength: 255 });
const batchIndex = fc.nat({ max: 10_000 });

const paramKey = fc.stringMatching(/^[a-z*][a-z0-9_\-.*]{0,6}$/);
const bareItem = fc.oneof(
  fc.integer({ min: -999_999_999_999_999, max: 999_999_999_999_999 }),
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 12 }),
  fc.stringMatching(/^[A-Za-z*][A-Za-z0-9!#$%&'*+\-.^_`|~:/]{0,8}$/).map((t) => new Token(t)),
  fc.boolean(),
  fc.uint8Array({ maxLength: 8 }),
);
const params = fc
  .uniqueArray(fc.tuple(paramKey, bareItem), { selector: ([k]) => k, maxLength: 3 })
  .map((entries) => new Map(entries));

function keyOrReason(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (error) {
    if (error instanceof IdempotencyError) return error.reason;
    throw error;
  }
}

/** What the contract says Idempotency-Keys means, computed with structured-headers. */
function referenceKeys(header: string): Map<number, string> | 'key_invalid' {
  let dictionary: ReturnType<typeof parseDictionary>;
  try {
    dictionary = parseDictionary(StructuredFieldReader.trimOWS(header));
  } catch {
    return 'key_invalid';
  }
  const keys = new Map<number, string>();
  for (const [name, member] of dictionary) {
    const match = /^b(0|[1-9][0-9]*)$/.exec(name);
    const value = member[0];
    if (!match || !Number.isSafeInteger(Number(match[1])) || typeof value !== 'string') return 'key_invalid';
    try {
      validateKey(value);
    } catch {
      return 'key_invalid';
    }
    keys.set(Number(match[1]), value);
  }
  return keys;
}

/** What the contract says a quoted Idempotency-Key means, computed with structured-headers. */
function referenceKey(header: string): string {
  let item: ReturnType<typeof parseItem>;
  try {
    item = parseItem(StructuredFieldReader.trimOWS(header));
  } catch {
    return 'key_invalid';
  }
  if (typeof item[0] !== 'string') return 'key_invalid';
  return keyOrReason(() => validateKey(item[0] as string)) as string;
}

// Fragments that exercise every branch of the grammar, glued at random into mostly-invalid headers.
const fragment = fc.constantFrom(
  'b0',
  'b1',
  'b12',
  'b01',
  'a',
  '*',
  'B0',
  '=',
  '"k1"',
  '"k 2"',
  '"a\\"b"',
  '"\\x"',
  '"',
  '\\',
  ',',
  ', ',
  ' ,',
  ' ',
  '\t',
  ';',
  ';p=1',
  '; q',
  '=?1',
  '=:YQ==:',
  '=tok',
  '=1.5',
  '=-3',
  '=@12',
  '=%"%c3%bc"',
  '=%"%ff"',
  '(',
  ')',
  '("x")',
  'é',
);
const fuzzHeader = fc.array(fragment, { maxLength: 10 }).map((parts) => parts.join(''));

// Member-shaped pieces with occasional faults, so that many of the headers are valid or nearly so.
const mostly = (valid: string[], faulty: string[]) =>
  fc.oneof({ arbitrary: fc.constantFrom(...valid), weight: 12 }, { arbitrary: fc.constantFrom(...faulty), weight: 1 });
const memberName = mostly(['b0', 'b1', 'b7', 'b42'], ['b01', 'x', '*b', 'b', 'B1']);
const memberValue = mostly(['="k1"', '="k2";p', '="a\\"b"'], ['=""', '="a b"', '=k1', '=1', '', '=("k")', '= "k"']);
const memberParams = mostly(['', ';p=1', '; p', ';p="x"'], [';P=1', ' ;p', ';']);
const separator = mostly([', ', ',', ' , ', ',\t'], [' ', ',,', '']);
const structuredHeader = fc
  .array(fc.tuple(memberName, memberValue, memberParams, separator), { minLength: 1, maxLength: 5 })
  .map((members) =>
    members.map(([name, value, p, sep], i) => `${name}${value}${p}${i < members.length - 1 ? sep : ''}`).join(''),
  );

describe('Idempotency-Key against structured-headers', () => {
  it('reads back any valid key that structured-headers serialized, with any parameters', () => {
    fc.assert(
      fc.property(validKey, params, (key, p) => {
        expect(parseIdempotencyKey(serializeItem(key, p))).toBe(key);
      }),
      { numRuns: 500 },
    );
  });

  it('writes any valid key the way structured-headers reads it', () => {
    fc.assert(
      fc.property(validKey, (key) => {
        expect(parseItem(serializeKeyHeader(key))[0]).toBe(key);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with structured-headers on arbitrary quoted values', () => {
    fc.assert(
      fc.property(fuzzHeader, (tail) => {
        const header = `"${tail}`;
        expect(keyOrReason(() => parseIdempotencyKey(header))).toBe(referenceKey(header));
      }),
      { numRuns: 3000 },
    );
  });

  it('agrees with structured-headers on strings of arbitrary printable characters', () => {
    const printable = fc.integer({ min: 0x1f, max: 0x7f }).map((c) => String.fromCharCode(c));
    fc.assert(
      fc.property(fc.string({ unit: printable, maxLength: 20 }), (inner) => {
        const header = `"${inner}"`;
        expect(keyOrReason(() => parseIdempotencyKey(header))).toBe(referenceKey(header));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('Idempotency-Keys against structured-headers', () => {
  const dictionary = fc.array(fc.tuple(batchIndex, validKey, params), { maxLength: 8 });

  it('reads any dictionary of keys structured-headers serialized; the last duplicate wins', () => {
    fc.assert(
      fc.property(dictionary, (members) => {
        // structured-headers takes a Map, so duplicates are spliced into the text by hand.
        const header = members.map(([i, key, p]) => `b${i}=${serializeItem(key, p)}`).join(', ');
        const expected = new Map<number, string>();
        for (const [i, key] of members) expected.set(i, key);
        expect(parseIdempotencyKeys(header)).toEqual(expected);
        expect(referenceKeys(header)).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });

  it('writes any dictionary of keys the way structured-headers reads it', () => {
    fc.assert(
      fc.property(fc.dictionary(batchIndex.map(String), validKey, { maxKeys: 8 }), (keys) => {
        const parsed = parseDictionary(serializeKeysDictionary(keys));
        const back = Object.fromEntries([...parsed].map(([name, [value]]) => [name.slice(1), value]));
        expect(back).toEqual(keys);
        expect(serializeKeysDictionary(keys)).toBe(
          serializeDictionary(
            new Map(
              Object.entries(keys)
                .sort(([a], [b]) => Number(a) - Number(b))
                .map(([i, k]) => [`b${i}`, [k, new Map()]]),
            ),
          ),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('agrees with structured-headers on member-shaped headers with occasional faults', () => {
    let valid = 0;
    fc.assert(
      fc.property(structuredHeader, (header) => {
        const expected = referenceKeys(header);
        if (expected !== 'key_invalid') valid++;
        expect(keyOrReason(() => parseIdempotencyKeys(header))).toEqual(expected);
      }),
      { numRuns: 5000 },
    );
    // The generator must produce enough valid headers for the agreement to mean something.
    expect(valid).toBeGreaterThan(250);
  });

  it('agrees with structured-headers on arbitrary fragments glued together', () => {
    fc.assert(
      fc.property(fuzzHeader, (header) => {
        expect(keyOrReason(() => parseIdempotencyKeys(header))).toEqual(referenceKeys(header));
      }),
      { numRuns: 5000 },
    );
  });
});
