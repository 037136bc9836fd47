/** A completed result as the store holds it; the cache keeps exactly what a replay needs. */
export interface CachedResult {
  fingerprint: string;
  /** The stored response text (`encodeStoredResponse`). */
  response: string;
  /**
   * performance.now() ms after which the key may no longer exist and must not be replayed: counted on this process's
   * monotonic clock from before the statement that learnt the expiry, never compared with the database's wall clock.
   */
  expiresAt: number;
}

export interface ReplayCacheOptions {
  /** Most results kept; `0` disables the cache. */
  maxEntries: number;
  /** Most text kept, counted in string length (UTF-16 code units) of response, key and fingerprint; `0` disables. */
  maxBytes: number;
}

interface Entry extends CachedResult {
  size: number;
}

function checkLimit(name: keyof ReplayCacheOptions, value: number): void {
  if (!(value === Number.POSITIVE_INFINITY || (Number.isSafeInteger(value) && value >= 0))) {
    throw new RangeError(`ReplayCache ${name} must be a non-negative integer or Infinity, got ${value}`);
  }
}

/**
 * An in-process LRU of completed results, so a replay on this instance needs no database round trip at all.
 * Only completed results go in: they never change before they expire. A Map keeps insertion order, so
 * re-inserting on a hit makes its first key the least recently used one and every operation O(1).
 */
export class ReplayCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  #bytes = 0;

  constructor(opts: ReplayCacheOptions) {
    checkLimit('maxEntries', opts.maxEntries);
    checkLimit('maxBytes', opts.maxBytes);
    this.#maxEntries = opts.maxEntries;
    this.#maxBytes = opts.maxBytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Text currently held, in the unit of `maxBytes`. */
  get bytes(): number {
    return this.#bytes;
  }

  get(scope: string, key: string, nowMs: number): CachedResult | undefined {
    const id = callId(scope, key);
    const entry = this.#entries.get(id);
    if (entry === undefined) return undefined;
    this.#entries.delete(id);
    if (entry.expiresAt <= nowMs) {
      this.#bytes -= entry.size;
      return undefined;
    }
    this.#entries.set(id, entry);
    return { fingerprint: entry.fingerprint, response: entry.response, expiresAt: entry.expiresAt };
  }

  set(scope: string, key: string, result: CachedResult): void {
    const id = callId(scope, key);
    this.delete(scope, key);
    const size = id.length + result.fingerprint.length + result.response.length;
    // One result larger than the whole budget would only evict everything else and then itself.
    if (this.#maxEntries === 0 || size > this.#maxBytes) return;
    this.#entries.set(id, {
      fingerprint: result.fingerprint,
      response: result.response,
      expiresAt: result.expiresAt,
      size,
    });
    this.#bytes += size;
    this.#evict();
  }

  delete(scope: string, key: string): boolean {
    const id = callId(scope, key);
    const entry = this.#entries.get(id);
    if (entry === undefined) return false;
    this.#entries.delete(id);
    this.#bytes -= entry.size;
    return true;
  }

  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  #evict(): void {
    while (this.#entries.size > this.#maxEntries || this.#bytes > this.#maxBytes) {
      const oldest = this.#entries.entries().next();
      if (oldest.done) return;
      this.#entries.delete(oldest.value[0]);
      this.#bytes -= oldest.value[1].size;
    }
  }
}

/**
 * One string per (scope, key), for the cache and the in-flight gate. Length-prefixing the scope keeps ("a", "bc")
 * and ("ab", "c") apart whatever characters either contains.
 */
export function callId(scope: string, key: string): string {
  return `${scope.length}:${scope}${key}`;
}
