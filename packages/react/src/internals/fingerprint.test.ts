import { describe, expect, test } from 'vitest';
import { fingerprint } from './fingerprint.js';

/**
 * "The same submission again" must never be told for two inputs a transformer sends apart: the server would
 * fingerprint them apart and answer the second, under the first one's key, with a bare 422 (superjson keeps -0,
 * NaN, ±Infinity, undefined properties, RegExps, URLs, Errors and typed arrays that JSON turns into one value).
 */
/** A class instance like Luxon's DateTime: a cache its methods fill lazily, and its own JSON form. */
class Moment {
  cache: string | undefined;
  constructor(readonly at: number) {}
  format(): string {
    this.cache ??= new Date(this.at).toISOString();
    return this.cache;
  }
  toJSON(): string {
    return new Date(this.at).toISOString();
  }
}
function lazy(formatted: boolean): { when: Moment } {
  const when = new Moment(5);
  if (formatted) when.format();
  return { when };
}

function formData(fields: Record<string, string | Blob>): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  return form;
}

describe('fingerprint', () => {
  test.each([
    ['-0 and 0', { amount: -0 }, { amount: 0 }],
    ['NaN and null', { amount: Number.NaN }, { amount: null }],
    ['Infinity and null', { amount: Number.POSITIVE_INFINITY }, { amount: null }],
    ['-Infinity and Infinity', [Number.NEGATIVE_INFINITY], [Number.POSITIVE_INFINITY]],
    ['an undefined property and none', { note: undefined }, {}],
    // Found by an outside review: an own "__proto__" (JSON.parse makes one, and JSON sends it) set the canonical
    // copy's prototype instead, so these were taken as one input and the second went out under the first's key.
    [
      'two own "__proto__" properties',
      JSON.parse('{"__proto__":{"note":"A"}}'),
      JSON.parse('{"__proto__":{"note":"B"}}'),
    ],
    ['an own "__proto__" property and none', JSON.parse('{"a":1,"__proto__":{"x":1}}'), { a: 1 }],
    ['two RegExps', { match: /a/g }, { match: /a/i }],
    ['two URLs', { at: new URL('https://a.example/') }, { at: new URL('https://b.example/') }],
    ['two Errors', { cause: new Error('a') }, { cause: new Error('b') }],
    ['two typed arrays', { bytes: new Uint8Array([1]) }, { bytes: new Uint8Array([2]) }],
    ['a RegExp and an empty object', { v: /a/ }, { v: {} }],
    ['a Date and an object spelling its tag', { at: new Date(5) }, { at: { $date: 5 } }],
    ['a BigInt and an object spelling its tag', { n: 1n }, { n: { $bigint: '1' } }],
    ['undefined and an object spelling its tag', [undefined], [{ $undefined: true }]],
    [
      'a class instance and an object spelling its tag',
      { v: new Moment(5) },
      { v: { $json: '[object Object]', value: '1970-01-01T00:00:00.005Z' } },
    ],
    ['an object spelling a tag and one escaping it', { $date: 5 }, { $$date: 5 }],
    ['two plain objects whose toJSON differ', { a: 1, toJSON: () => 1 }, { a: 1, toJSON: () => 2 }],
    [
      'nested plain objects whose toJSON differ',
      { p: { v: 1, toJSON: () => 'x' } },
      { p: { v: 1, toJSON: () => 'y' } },
    ],
    ['two FormData', formData({ amount: '1' }), formData({ amount: '2' })],
    ['two files', formData({ doc: new File(['a'], 'a.txt') }), formData({ doc: new File(['ab'], 'a.txt') })],
  ])('tells %s apart', (_, a, b) => {
    expect(fingerprint(a)).not.toBe(fingerprint(b));
  });

  test.each([
    ['key order', { a: 1, b: { c: 2, d: 3 } }, { b: { d: 3, c: 2 }, a: 1 }],
    ['equal Dates', { at: new Date(5) }, { at: new Date(5) }],
    ['equal Maps', new Map([[1, 'x']]), new Map([[1, 'x']])],
    ['0 and 0', { amount: 0 }, { amount: 0 }],
    ['NaN and NaN', { amount: Number.NaN }, { amount: Number.NaN }],
    ['a function property and none', { amount: 1, f: () => 1 }, { amount: 1 }],
    ['equal FormData', formData({ amount: '1' }), formData({ amount: '1' })],
    ['a value whose lazy cache filled in between (it sends the same JSON)', lazy(true), lazy(false)],
  ])('keeps %s the same', (_, a, b) => {
    expect(fingerprint(a)).toBe(fingerprint(b));
  });
});
