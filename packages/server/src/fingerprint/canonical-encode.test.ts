import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CanonicalEncodeError, canonicalEncode, canonicalEncodeAsync } from './canonical-encode.js';

const differ = (a: unknown, b: unknown) => expect(canonicalEncode(a)).not.toBe(canonicalEncode(b));
const same = (a: unknown, b: unknown) => expect(canonicalEncode(a)).toBe(canonicalEncode(b));

describe('canonicalEncode: what counts as equal', () => {
  it('ignores object key order', () => {
    same({ a: 1, b: { c: 2, d: 3 } }, { b: { d: 3, c: 2 }, a: 1 });
  });

  it('omits undefined properties, like JSON does', () => {
    same({ a: 1, b: undefined }, { a: 1 });
  });

  it('ignores Map insertion order and Set insertion order', () => {
    same(
      new Map<unknown, unknown>([
        ['a', 1],
        [2, 'b'],
        [{ k: 1 }, null],
      ]),
      new Map<unknown, unknown>([
        [{ k: 1 }, null],
        [2, 'b'],
        ['a', 1],
      ]),
    );
    same(new Set([1, 'x', { y: 2 }]), new Set([{ y: 2 }, 'x', 1]));
  });

  it('treats a null-prototype object like a plain one', () => {
    same(Object.assign(Object.create(null), { a: 1 }), { a: 1 });
  });

  it('reads a Node Buffer as the Uint8Array it is', () => {
    same(Buffer.from([1, 2, 3]), new Uint8Array([1, 2, 3]));
  });

  it('encodes a shared, non-cyclic reference at every place it appears', () => {
    const shared = { x: 1 };
    same({ a: shared, b: shared }, { a: { x: 1 }, b: { x: 1 } });
  });

  it('ignores symbol-keyed properties, which JSON never sends', () => {
    same({ a: 1, [Symbol('s')]: 2 }, { a: 1 });
  });
});

describe('canonicalEncode: what counts as different', () => {
  it('never equates a Date with its ISO string or its epoch number', () => {
    const date = new Date('2024-01-02T03:04:05.006Z');
    differ(date, date.toISOString());
    differ(date, date.getTime());
    differ(new Date(0), new Date(1));
    differ(new Date(Number.NaN), Number.NaN);
  });

  it('tells BigInt, number and numeric string apart', () => {
    differ(1n, 1);
    differ(1, '1');
    differ(1n, '1');
  });

  it('tells -0, 0, NaN and the infinities apart', () => {
    const values = [0, -0, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY];
    expect(new Set(values.map((v) => canonicalEncode(v))).size).toBe(values.length);
  });

  it('tells null, undefined, false, 0, empty string, empty array and empty object apart', () => {
    const values = [null, undefined, false, 0, '', [], {}, new Map(), new Set()];
    expect(new Set(values.map((v) => canonicalEncode(v))).size).toBe(values.length);
  });

  it('keeps array order and array holes/undefined versus null', () => {
    differ([1, 2], [2, 1]);
    differ([undefined], [null]);
    differ([undefined], []);
  });

  it('tells a Map from an object with the same entries, and a Set from an array', () => {
    differ(new Map([['a', 1]]), { a: 1 });
    differ(new Set([1, 2]), [1, 2]);
    differ(new Map([[1, 'a']]), new Map([['1', 'a']]));
  });

  it('tells typed arrays of different kinds and contents apart', () => {
    differ(new Uint8Array([1, 2]), new Int8Array([1, 2]));
    differ(new Uint8Array([1, 2]), new Uint8Array([1, 3]));
    differ(new Uint8Array([1, 2]), [1, 2]);
    differ(new Float64Array([0]), new Float64Array([-0]));
    differ(new Uint8Array([1]).buffer, new Uint8Array([1]));
  });

  it('tells a class instance from a plain object with the same properties', () => {
    class Money {
      constructor(
        readonly amount: number,
        readonly currency: string,
      ) {}
    }
    differ(new Money(1, 'EUR'), { amount: 1, currency: 'EUR' });
    differ(new Money(1, 'EUR'), new Money(2, 'EUR'));
    same(new Money(1, 'EUR'), new Money(1, 'EUR'));
  });

  it('tells RegExps, URLs, Errors and boxed primitives apart by their content', () => {
    differ(/a/g, /a/i);
    differ(/a/, /b/);
    differ(new URL('https://a.test/x'), new URL('https://a.test/y'));
    differ(new Error('a'), new Error('b'));
    differ(new TypeError('a'), new Error('a'));
    differ(Object(1), Object(2));
    differ(Object('a'), 'a');
  });

  it('uses toJSON for class instances that define it', () => {
    class Decimal {
      #digits: string;
      constructor(digits: string) {
        this.#digits = digits;
      }
      toJSON() {
        return this.#digits;
      }
    }
    differ(new Decimal('1.10'), new Decimal('1.1'));
    same(new Decimal('2'), new Decimal('2'));
    differ(new Decimal('2'), '2');
  });

  it('cannot be fooled by strings that contain the encoding syntax', () => {
    differ({ a: 's1:b' }, { a: 'b', s1: 'b' });
    differ(['a', 'b'], ['ab']);
    differ({ ab: 'c' }, { a: 'bc' });
    differ('\uD800', '\uD801');
  });
});

describe('canonicalEncode: binary data', () => {
  it('writes bytes as the standard base64 Buffer wrote, so stored fingerprints still match (seed 1204)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 70_000 }), (data) => {
        const base64 = Buffer.from(data).toString('base64');
        expect(canonicalEncode(data)).toBe(`BUint8Array;${base64.length}:${base64}`);
      }),
      { numRuns: 40, seed: 1204 },
    );
  });

  it('refuses a Blob synchronously, and encodes it by type, name and a digest of its bytes async', async () => {
    expect(() => canonicalEncode(new Blob(['x']))).toThrow(/use canonicalEncodeAsync/);
    const text = await canonicalEncodeAsync(new File(['x'], 'a.txt', { type: 'text/plain' }));
    expect(text).toMatch(/^Yfs10:text\/plains5:a\.txth[0-9a-f]{64};$/);
    expect(await canonicalEncodeAsync(new File(['x'], 'a.txt', { lastModified: 1 }))).toBe(
      await canonicalEncodeAsync(new File(['x'], 'a.txt', { lastModified: 2 })),
    );
  });
});

describe('canonicalEncode: FormData, Blob and streams from another implementation', () => {
  // What a polyfill (formdata-node, fetch-blob) or another realm hands over: not instances of this realm's classes.
  class ForeignBlob {
    constructor(
      readonly text: string,
      readonly type = '',
    ) {}
    get size() {
      return this.text.length;
    }
    get [Symbol.toStringTag]() {
      return 'Blob';
    }
    async arrayBuffer() {
      return new TextEncoder().encode(this.text).buffer;
    }
  }
  class ForeignFormData {
    constructor(readonly fields: [string, string | ForeignBlob][]) {}
    get [Symbol.toStringTag]() {
      return 'FormData';
    }
    entries() {
      return this.fields[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
  }

  it('encodes them by their content, like the built-in ones', async () => {
    const a = await canonicalEncodeAsync(new ForeignFormData([['amount', '10']]));
    expect(a).not.toBe(await canonicalEncodeAsync(new ForeignFormData([['amount', '9999']])));
    expect(a).toBe(await canonicalEncodeAsync(new ForeignFormData([['amount', '10']])));
    expect(await canonicalEncodeAsync(new ForeignBlob('x'))).toBe(await canonicalEncodeAsync(new Blob(['x'])));
    expect(await canonicalEncodeAsync(new ForeignBlob('x'))).not.toBe(await canonicalEncodeAsync(new ForeignBlob('y')));
  });

  it('refuses a Node Readable stream as it refuses a web ReadableStream', async () => {
    const { Readable } = await import('node:stream');
    expect(() => canonicalEncode(Readable.from(['abc']))).toThrow(/binary stream/);
  });
});

describe('canonicalEncode: inputs it refuses', () => {
  it('throws a CanonicalEncodeError naming the path of a function', () => {
    const attempt = () => canonicalEncode({ items: [{ ok: 1 }, { cb: () => 1 }] });
    expect(attempt).toThrow(CanonicalEncodeError);
    expect(attempt).toThrow('Cannot fingerprint a function at (root).items[1].cb');
  });

  it('throws for a symbol value, quoting keys that are not identifiers', () => {
    expect(() => canonicalEncode({ 'a-b': Symbol('x') })).toThrow(/symbol at \(root\)\["a-b"\]/);
  });

  it('throws for a cycle but not for repeated references', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(() => canonicalEncode(cyclic)).toThrow(/cyclic structure at \(root\)\.self/);
    const cyclicMap = new Map<string, unknown>();
    cyclicMap.set('m', cyclicMap);
    expect(() => canonicalEncode(cyclicMap)).toThrow(CanonicalEncodeError);
  });
});

// Arbitrary JSON-and-beyond values: what getRawInput() can hold with or without a transformer.
const { value: anyValue } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string(),
    fc.double(),
    fc.integer(),
    fc.bigInt(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.date(),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string(), tie('value'), { maxKeys: 4 }),
    fc.array(fc.tuple(tie('value'), tie('value')), { maxLength: 3 }).map((entries) => new Map(entries)),
    fc.array(tie('value'), { maxLength: 3 }).map((members) => new Set(members)),
  ),
}));

function shuffleKeys(value: unknown, order: number[]): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, order));
  if (value instanceof Map) {
    const entries = [...value].map(([k, v]): [unknown, unknown] => [k, shuffleKeys(v, order)]);
    return new Map(rotate(entries, order));
  }
  if (value instanceof Set) return new Set(rotate([...value], order));
  if (typeof value === 'object' && value !== null && !(value instanceof Date)) {
    const entries = Object.entries(value).map(([k, v]): [string, unknown] => [k, shuffleKeys(v, order)]);
    const out: Record<string, unknown> = {};
    for (const [k, v] of rotate(entries, order)) Object.defineProperty(out, k, { value: v, enumerable: true });
    return out;
  }
  return value;
}

function rotate<T>(items: T[], order: number[]): T[] {
  const copy = [...items];
  const out: T[] = [];
  for (let i = 0; copy.length > 0; i++) out.push(copy.splice((order[i % order.length] ?? 0) % copy.length, 1)[0]!);
  return out;
}

describe('canonicalEncode properties', () => {
  it('encodes any re-ordering of object keys, Map entries and Set members the same', () => {
    fc.assert(
      fc.property(anyValue, fc.array(fc.nat(), { minLength: 1, maxLength: 5 }), (value, order) => {
        expect(canonicalEncode(shuffleKeys(value, order))).toBe(canonicalEncode(value));
      }),
      { numRuns: 500 },
    );
  });

  it('encodes two JSON values the same exactly when they are deeply equal', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        const equal = JSON.stringify(sortDeep(a)) === JSON.stringify(sortDeep(b));
        expect(canonicalEncode(a) === canonicalEncode(b)).toBe(equal);
      }),
      { numRuns: 1000 },
    );
  });

  it('changes whenever one leaf of an object changes', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), anyValue, { minKeys: 1, maxKeys: 6 }),
        fc.nat(),
        anyValue,
        (record, pick, replacement) => {
          const keys = Object.keys(record);
          const key = keys[pick % keys.length]!;
          const before = record[key];
          fc.pre(!(before === undefined && replacement === undefined));
          fc.pre(canonicalEncode(before) !== canonicalEncode(replacement));
          // Setting a property to undefined removes it, which is a change unless it was already absent.
          expect(canonicalEncode({ ...record, [key]: replacement })).not.toBe(canonicalEncode(record));
        },
      ),
      { numRuns: 500 },
    );
  });
});

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortDeep);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortDeep((value as Record<string, unknown>)[k])]),
    );
  }
  return Object.is(value, -0) ? 0 : value;
}
