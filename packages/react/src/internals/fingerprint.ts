/**
 * A canonical text of a mutation's variables: equal inputs give equal text whatever their key order, so
 * "the same submission again" is told apart from "a changed input". Dates, BigInts, Maps and Sets are
 * tagged, as the server's fingerprint does; functions and symbols are not inputs and are dropped.
 */
export function fingerprint(value: unknown): string {
  return JSON.stringify(canonical(value, new Set()));
}

function canonical(value: unknown, seen: Set<object>): unknown {
  if (typeof value === 'bigint') return { $bigint: value.toString() };
  if (typeof value === 'undefined') return { $undefined: true };
  if (typeof value !== 'object' || value === null) return value;
  if (seen.has(value)) throw new TypeError('useIdempotentMutation: the variables contain a cycle');
  seen.add(value);
  try {
    if (value instanceof Date) return { $date: value.getTime() };
    if (Array.isArray(value)) return value.map((item) => canonical(item, seen));
    if (value instanceof Map) return { $map: [...value].map(([k, v]) => [canonical(k, seen), canonical(v, seen)]) };
    if (value instanceof Set) return { $set: [...value].map((item) => canonical(item, seen)) };
    const out: Record<string, unknown> = {};
    for (const name of Object.keys(value).sort()) {
      const item = (value as Record<string, unknown>)[name];
      if (item !== undefined && typeof item !== 'function' && typeof item !== 'symbol')
        out[name] = canonical(item, seen);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}
