/**
 * One keyed call that was sent and has no definitive answer yet, as `pendingCallsLink` records it before
 * its first attempt. `input` may hold what the user typed (amounts, addresses): it is stored in clear.
 */
export interface PendingCall {
  /** The idempotency key every attempt of the call carries. */
  key: string;
  /** The procedure's dotted path: `'payments.create'`. */
  path: string;
  /** The input as the app's transformer serialized it, then `JSON.stringify`-ed. */
  input: string;
  /** When the call was first sent (epoch ms, this device's clock): the server's `ttl` runs from about then. */
  firstSentAt: number;
}

/**
 * Where pending calls are kept between page loads: one small async interface for `localStorage`,
 * IndexedDB and React Native's AsyncStorage. `namespace` separates users: one user's calls are never
 * listed, resumed or cleared for another.
 */
export interface PendingCallStore {
  /** Every call recorded under `namespace`, oldest first. */
  list(namespace: string): Promise<PendingCall[]>;
  /** Records a call, replacing one with the same key. Resolves once it is durable. */
  put(namespace: string, call: PendingCall): Promise<void>;
  /** Forgets one call; forgetting an absent one is not an error. */
  remove(namespace: string, key: string): Promise<void>;
  /** Forgets every call of `namespace` (sign-out). */
  clear(namespace: string): Promise<void>;
  /**
   * The namespaces holding a call under `key`. A call belongs to the user who first sent it: `pendingCallsLink` asks
   * before sending a key it has not sent since the page loaded, and refuses one that is another user's.
   */
  namespacesOf(key: string): Promise<string[]>;
}

/** Parses a stored record, or `undefined` for anything that is not one (another app's entry, a torn write). */
export function parsePendingCall(text: string | null | undefined): PendingCall | undefined {
  if (!text) return undefined;
  try {
    const value = JSON.parse(text) as Partial<PendingCall>;
    if (typeof value.key === 'string' && typeof value.path === 'string' && typeof value.input === 'string') {
      // A damaged first-sent time (a string, a NaN written as null, none) is a call of unknown age: listed as NaN,
      // so resume() reports it expired and forgets it, rather than skipping it and leaving it stored forever.
      const firstSentAt = typeof value.firstSentAt === 'number' ? value.firstSentAt : Number.NaN;
      return { key: value.key, path: value.path, input: value.input, firstSentAt };
    }
  } catch {
    // not ours
  }
  return undefined;
}

/**
 * The call stored under entry `name` of a namespace whose entries start with `start`, or `undefined` when the entry
 * is not one, or names another key than its record's (damaged, copied by hand): `remove()` forgets a call by its
 * key, so such an entry could be resumed on every start and never forgotten.
 */
export function storedCall(name: string, start: string, text: string | null | undefined): PendingCall | undefined {
  const call = parsePendingCall(text);
  return call && start + call.key === name ? call : undefined;
}

/** Oldest first; a call of unknown age (NaN) before every other, so the order is one whatever the input's. */
export function byFirstSent(a: PendingCall, b: PendingCall): number {
  const at = (call: PendingCall) => (Number.isNaN(call.firstSentAt) ? Number.NEGATIVE_INFINITY : call.firstSentAt);
  return at(a) - at(b) || 0;
}

/** `prefix:namespace:` with the namespace escaped, so `a:b` and `a` + `:b` never share entries. */
export function entryPrefix(prefix: string, namespace: string): string {
  return `${prefix}:${encodeURIComponent(namespace)}:`;
}

/**
 * The namespace of entry `name` when it is `prefix:namespace:key` for this `key` (the namespace escaped as
 * {@link entryPrefix} does), else `undefined`.
 */
export function entryNamespace(prefix: string, name: string, key: string): string | undefined {
  const start = `${prefix}:`;
  const end = `:${key}`;
  if (!name.startsWith(start) || !name.endsWith(end) || name.length < start.length + end.length) return undefined;
  const escaped = name.slice(start.length, name.length - end.length);
  // An escaped namespace has no ':' (a key may): any other split is another entry's.
  if (escaped.includes(':')) return undefined;
  try {
    return decodeURIComponent(escaped);
  } catch {
    return undefined; // not ours
  }
}
