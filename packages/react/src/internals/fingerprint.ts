/**
 * A canonical text of a mutation's variables: equal inputs give equal text whatever their key order, so
 * "the same submission again" is told apart from "a changed input". Dates, BigInts, Maps and Sets are
 * tagged, as the server's fingerprint does (an object's own names starting with "$" are escaped, so no input spells a
 * tag); functions and symbols are not inputs and are dropped.
 *
 * It errs on telling inputs apart: two inputs told apart that the server would take as one only make the hook
 * settle the earlier submission first (a round trip), while two taken as one that a transformer sends apart
 * (superjson keeps -0, NaN, ±Infinity, undefined properties, RegExps, URLs, Errors) would go under one key and
 * get a bare 422. So every number JSON cannot write, and every object that is not plain, is tagged.
 */
export function fingerprint(value: unknown): string {
  return JSON.stringify(canonical(value, new Set()));
}

function canonical(value: unknown, seen: Set<object>): unknown {
  if (typeof value === 'bigint') return { $bigint: value.toString() };
  if (typeof value === 'undefined') return { $undefined: true };
  if (typeof value === 'number' && (!Number.isFinite(value) || Object.is(value, -0))) {
    return { $number: Object.is(value, -0) ? '-0' : String(value) };
  }
  if (typeof value !== 'object' || value === null) return value;
  if (seen.has(value)) throw new TypeError('useIdempotentMutation: the variables contain a cycle');
  seen.add(value);
  try {
    if (value instanceof Date) return { $date: value.getTime() };
    if (Array.isArray(value)) return value.map((item) => canonical(item, seen));
    if (value instanceof Map) return { $map: [...value].map(([k, v]) => [canonical(k, seen), canonical(v, seen)]) };
    if (value instanceof Set) return { $set: [...value].map((item) => canonical(item, seen)) };
    // Form posts (tRPC's non-JSON inputs): fields in order; a file by what can be read without reading it.
    if (typeof FormData !== 'undefined' && value instanceof FormData) {
      return { $formData: [...value.entries()].map(([name, item]) => [name, canonical(item, seen)]) };
    }
    if (typeof Blob !== 'undefined' && value instanceof Blob) {
      const file = value as Blob & { name?: string; lastModified?: number };
      return { $blob: [file.size, file.type, file.name ?? null, file.lastModified ?? null] };
    }
    // No prototype: an own "__proto__" name (JSON.parse makes one, JSON sends it) is then a name like any other.
    const out: Record<string, unknown> = Object.create(null);
    for (const name of Object.keys(value).sort()) {
      const item = (value as Record<string, unknown>)[name];
      // An undefined property is kept apart from a missing one: superjson sends it.
      // A name starting with "$" gets one more: `{ $date: 5 }` never reads as the tag of `new Date(5)`.
      if (typeof item !== 'function' && typeof item !== 'symbol') {
        out[name.startsWith('$') ? `$${name}` : name] = canonical(item, seen);
      }
    }
    // A value with its own JSON form (a URL, Luxon's DateTime, even a plain object with a `toJSON`) is what it sends:
    // compared by that form, not by fields such as lazily filled caches.
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') {
      return { $json: Object.prototype.toString.call(value), value: canonical(toJSON.call(value), seen) };
    }
    const prototype = Object.getPrototypeOf(value);
    if (prototype === Object.prototype || prototype === null) return out;
    // Not a plain object (a RegExp, a URL, an Error, a class instance): its kind and its text count too, as its
    // own properties may be none.
    const text = value instanceof Error ? `${value.name}: ${value.message}` : String(value);
    return {
      $object: Object.prototype.toString.call(value),
      constructor: prototype?.constructor?.name,
      text,
      own: out,
    };
  } finally {
    seen.delete(value);
  }
}
