import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fingerprint } from './fingerprint.js';

// One seed for the file, printed so a failure can be replayed: FINGERPRINT_SEED=<seed> npx vitest run <this file>.
const seed = Number(process.env.FINGERPRINT_SEED ?? 20_261_203);
console.log(`[fingerprint property] seed ${seed}`);

// The bytes each Blob was made from, so the oracle below can compare contents without reading them.
const blobText = new WeakMap<Blob, string>();
const blob = fc
  .record({
    text: fc.constantFrom('a', 'b', ''),
    type: fc.constantFrom('', 'text/plain'),
    name: fc.constantFrom(undefined, 'f.txt', 'g.txt'),
  })
  .map(({ text, type, name }) => {
    const b = name === undefined ? new Blob([text], { type }) : new File([text], name, { type });
    blobText.set(b, text);
    return b;
  });

// A small domain, so that equal pairs come up often and near-misses (Date vs ISO string, -0 vs 0) even more.
const leaf = fc.oneof(
  fc.constantFrom<unknown>(0, -0, Number.NaN, 1, '1', '', 'a', true, false, null, undefined, 0n, 1n),
  fc.constantFrom('1970-01-01T00:00:00.000Z', '0'),
  fc.constantFrom(0, 1, Number.NaN).map((ms) => new Date(ms)),
  blob,
);
const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 3 },
    leaf,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.sparseArray(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('a', 'b', 'c'), tie('value'), { maxKeys: 3 }),
    fc.array(fc.tuple(leaf, tie('value')), { maxLength: 3 }).map((entries) => new Map(entries)),
    fc.array(tie('value'), { maxLength: 3 }).map((members) => new Set(members)),
  ),
}));

/**
 * Written apart from the encoder: what "the same input" means. Key, Map and Set order do not count; an undefined
 * property is an absent one; an array hole is undefined; -0 is not 0, NaN is NaN; a Date is not its ISO string
 * or its number; a Blob is its type, its file name and its bytes.
 */
function same(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (a instanceof Date || b instanceof Date) {
    return a instanceof Date && b instanceof Date && Object.is(a.getTime(), b.getTime());
  }
  if (a instanceof Blob || b instanceof Blob) {
    if (!(a instanceof Blob && b instanceof Blob) || a.type !== b.type) return false;
    if (a instanceof File !== b instanceof File) return false;
    if (a instanceof File && a.name !== (b as File).name) return false;
    return blobText.get(a) === blobText.get(b);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!same(a[i], b[i])) return false;
    return true;
  }
  if (a instanceof Map || b instanceof Map) {
    return (
      a instanceof Map &&
      b instanceof Map &&
      sameMultiset([...a], [...b], ([ka, va], [kb, vb]) => same(ka, kb) && same(va, vb))
    );
  }
  if (a instanceof Set || b instanceof Set) {
    return a instanceof Set && b instanceof Set && sameMultiset([...a], [...b], same);
  }
  const defined = (o: object) =>
    Object.entries(o)
      .filter(([, v]) => v !== undefined)
      .sort(([x], [y]) => (x < y ? -1 : 1));
  const ea = defined(a);
  const eb = defined(b);
  return ea.length === eb.length && ea.every(([k, v], i) => eb[i]![0] === k && same(v, eb[i]![1]));
}

// `same` is an equivalence, so matching greedily against any unused equal member is exact.
function sameMultiset<T>(a: T[], b: T[], eq: (x: T, y: T) => boolean): boolean {
  if (a.length !== b.length) return false;
  const unused = [...b];
  for (const x of a) {
    const i = unused.findIndex((y) => eq(x, y));
    if (i < 0) return false;
    unused.splice(i, 1);
  }
  return true;
}

/** The same input rebuilt: fresh objects, keys and Map/Set entries reversed, an undefined property added. */
function rebuild(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (v instanceof Date) return new Date(v.getTime());
  if (v instanceof Blob) {
    const copy =
      v instanceof File
        ? new File([blobText.get(v)!], v.name, { type: v.type })
        : new Blob([blobText.get(v)!], { type: v.type });
    blobText.set(copy, blobText.get(v)!);
    return copy;
  }
  if (Array.isArray(v)) {
    const copy = new Array(v.length);
    v.forEach((item, i) => {
      copy[i] = rebuild(item);
    });
    return copy;
  }
  if (v instanceof Map) return new Map([...v].reverse().map(([k, x]) => [rebuild(k), rebuild(x)]));
  if (v instanceof Set) return new Set([...v].reverse().map(rebuild));
  return Object.fromEntries([
    ...Object.entries(v)
      .reverse()
      .map(([k, x]) => [k, rebuild(x)]),
    ['zz', undefined],
  ]);
}

describe(`fingerprint properties (seed ${seed})`, () => {
  it('gives two inputs the same fingerprint exactly when they are the same input', async () => {
    let equalPairs = 0;
    await fc.assert(
      // Pairs of bare leaves too: that is where near-misses (-0 and 0, a Date and its string) meet most often.
      fc.asyncProperty(fc.oneof(fc.tuple(value, value), fc.tuple(leaf, leaf)), async ([a, b]) => {
        const expected = same(a, b);
        if (expected) equalPairs++;
        expect((await fingerprint('p', a)) === (await fingerprint('p', b))).toBe(expected);
      }),
      { numRuns: 1500, seed },
    );
    console.log(`[fingerprint property] 1500 pairs, ${equalPairs} of them the same input`);
    expect(equalPairs).toBeGreaterThan(30);
  });

  it('gives an input rebuilt with other key, Map and Set orders and undefined properties one fingerprint', async () => {
    await fc.assert(
      fc.asyncProperty(value, async (v) => {
        expect(await fingerprint('p', rebuild(v))).toBe(await fingerprint('p', v));
      }),
      { numRuns: 500, seed },
    );
  });
});
