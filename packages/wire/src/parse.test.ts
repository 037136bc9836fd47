import fc from 'fast-check';
import { parseList, Token } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { parseStringDictionary, parseStringItem, parseTokenList } from './parse.js';
import { StructuredFieldSyntaxError } from './structured-field-reader.js';

// The Item and Dictionary readers are checked against structured-headers through the server's key parsers
// (packages/server/src/wire/structured-fields.property.test.ts); the List of Tokens, which only the client reads
// (Idempotent-Replayed), is checked here.

describe('parseStringItem', () => {
  it('reads the String and ignores its parameters, a Date among them wherever it stands', () => {
    expect(parseStringItem(' "a\\"b";x=1 ')).toBe('a"b');
    // structured-headers 2.1.0 rejects this (its Date parser reads to the end of the field); RFC 9651 allows it.
    expect(parseStringItem('"k";d=@1659578233;e=2')).toBe('k');
  });

  it('throws a StructuredFieldSyntaxError for anything that is not one String Item', () => {
    for (const value of ['"abc', 'abc', '"a" "b"', '"a";', '"a\\x"']) {
      expect(() => parseStringItem(value), value).toThrow(StructuredFieldSyntaxError);
    }
  });
});

describe('parseStringDictionary', () => {
  it('maps each member to its String, or null for any other value; the last duplicate wins', () => {
    expect(parseStringDictionary('b0="k1";p, b1=tok, b2, b3=("x"), b0="k0"')).toEqual(
      new Map([
        ['b0', 'k0'],
        ['b1', null],
        ['b2', null],
        ['b3', null],
      ]),
    );
  });

  it('reads an empty value as an empty dictionary and rejects a trailing comma', () => {
    expect(parseStringDictionary('')).toEqual(new Map());
    expect(() => parseStringDictionary('b0="k",')).toThrow(StructuredFieldSyntaxError);
  });
});

describe('parseTokenList', () => {
  it('reads the replayed members of a batch, parameters ignored', () => {
    expect(parseTokenList('b0, b2;x=1,\tb10')).toEqual(['b0', 'b2', 'b10']);
    expect(parseTokenList('')).toEqual([]);
  });

  const tokenChars = fc.constantFrom(...'abAB01*:/!#.-_~'.split(''));
  const piece = fc.oneof(
    fc.string({ unit: tokenChars, minLength: 1, maxLength: 4 }),
    fc.constantFrom(',', ', ', ' ', '\t', ';p', ';p=1', ';q="x"', '"s"', '1', '?1', '(a)', ';'),
  );

  it('agrees with structured-headers on which values are Lists of Tokens and what they hold', () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const value = pieces.join('');
        let expected: string[] | 'invalid';
        try {
          const members = parseList(value.replace(/^[ \t]+|[ \t]+$/g, ''));
          expected = members.every(([item]) => item instanceof Token)
            ? members.map(([item]) => String(item))
            : 'invalid';
        } catch {
          expected = 'invalid';
        }
        let actual: string[] | 'invalid';
        try {
          actual = parseTokenList(value);
        } catch (error) {
          if (!(error instanceof StructuredFieldSyntaxError)) throw error;
          actual = 'invalid';
        }
        expect(actual, JSON.stringify(value)).toEqual(expected);
      }),
      { numRuns: 3000 },
    );
  });
});
