/*
 * A Promise or an async iterable in a result is streamed by tRPC (httpBatchStreamLink) as it settles, after the
 * middleware returned: the stored result could only hold what it was at commit time (JSON writes a Promise as {}),
 * so its replay would differ from the first answer. Such a result is refused, never stored.
 */

/** True for what tRPC streams instead of sending: a thenable, or an async iterable. */
export function isDeferred(value: object): boolean {
  return (
    typeof (value as { then?: unknown }).then === 'function' ||
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function'
  );
}

/** Thrown by the default serializer, which meets every object of the result anyway. */
export class DeferredValueError extends TypeError {
  constructor() {
    super('the result holds a Promise or an async iterable');
    this.name = 'DeferredValueError';
  }
}

/**
 * Where the first deferred value in `value` is (`result.receipt`, `result.items[2]`) and what it is, or undefined.
 * Walks the result once more: only a failing call (default serializer) or another serializer pays for it.
 */
export function findDeferred(value: unknown, path = 'result', ancestors = new Set<object>()): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  if (isDeferred(value)) {
    const what = typeof (value as { then?: unknown }).then === 'function' ? 'a Promise' : 'an async iterable';
    return `${what} at ${path}`;
  }
  if (ancestors.has(value)) return undefined;
  ancestors.add(value);
  try {
    const entries: Iterable<[string, unknown]> =
      value instanceof Map
        ? [...value].map(([k, v], i) => [`${path}.get(${typeof k === 'string' ? JSON.stringify(k) : i})`, v])
        : value instanceof Set
          ? [...value].map((v, i) => [`${path}[set ${i}]`, v])
          : Array.isArray(value)
            ? value.map((v, i) => [`${path}[${i}]`, v])
            : Object.keys(value).map((k) => [`${path}.${k}`, (value as Record<string, unknown>)[k]]);
    for (const [at, v] of entries) {
      const found = findDeferred(v, at, ancestors);
      if (found) return found;
    }
    return undefined;
  } finally {
    ancestors.delete(value);
  }
}
