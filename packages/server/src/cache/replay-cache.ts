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

/** A cached result in the recency list: `older` towards the next eviction, `newer` towards the last use. */
interface Entry extends CachedResult {
  id: string;
  size: number;
  older: Entry | undefined;
  newer: Entry | undefined;
}

function checkLimit(name: keyof ReplayCacheOptions, value: number): void {
  if (!(value === Number.POSITIVE_INFINITY || (Number.isSafeInteger(value) && value >= 0))) {
    throw new RangeError(`ReplayCache ${name} must be a non-negative integer or Infinity, got ${value}`);
  }
}

/**
 * An in-process LRU of completed results, so a replay on this instance needs no database round trip at all.
 * Only completed results go in: they never change before they expire. Entries are found through a Map and kept in
 * a doubly linked recency list, so a hit moves one entry to the newest end without touching the Map (deleting and
 * re-inserting a Map entry on every hit measured ~4% of a replay's CPU), and every operation is O(1).
 */
export class ReplayCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  #bytes = 0;
  /** The least recently used entry (evicted first) and the most recently used one. */
  #oldest: Entry | undefined;
  #newest: Entry | undefined;

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
    const entry = this.#entries.get(callId(scope, key));
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= nowMs) {
      this.#remove(entry);
      return undefined;
    }
    if (entry !== this.#newest) {
      this.#unlink(entry);
      this.#append(entry);
    }
    return { fingerprint: entry.fingerprint, response: entry.response, expiresAt: entry.expiresAt };
  }

  set(scope: string, key: string, result: CachedResult): void {
    const id = callId(scope, key);
    const previous = this.#entries.get(id);
    if (previous !== undefined) this.#remove(previous);
    const size = id.length + result.fingerprint.length + result.response.length;
    // One result larger than the whole budget would only evict everything else and then itself.
    if (this.#maxEntries === 0 || size > this.#maxBytes) return;
    const entry: Entry = {
      id,
      fingerprint: result.fingerprint,
      response: result.response,
      expiresAt: result.expiresAt,
      size,
      older: undefined,
      newer: undefined,
    };
    this.#entries.set(id, entry);
    this.#append(entry);
    this.#bytes += size;
    this.#evict();
  }

  delete(scope: string, key: string): boolean {
    const entry = this.#entries.get(callId(scope, key));
    if (entry === undefined) return false;
    this.#remove(entry);
    return true;
  }

  clear(): void {
    this.#entries.clear();
    this.#oldest = undefined;
    this.#newest = undefined;
    this.#bytes = 0;
  }

  #evict(): void {
    while (this.#oldest !== undefined && (this.#entries.size > this.#maxEntries || this.#bytes > this.#maxBytes)) {
      this.#remove(this.#oldest);
    }
  }

  #remove(entry: Entry): void {
    this.#entries.delete(entry.id);
    this.#unlink(entry);
    this.#bytes -= entry.size;
  }

  #append(entry: Entry): void {
    entry.older = this.#newest;
    entry.newer = undefined;
    if (this.#newest === undefined) this.#oldest = entry;
    else this.#newest.newer = entry;
    this.#newest = entry;
  }

  #unlink(entry: Entry): void {
    if (entry.older === undefined) this.#oldest = entry.newer;
    else entry.older.newer = entry.newer;
    if (entry.newer === undefined) this.#newest = entry.older;
    else entry.newer.older = entry.older;
    entry.older = undefined;
    entry.newer = undefined;
  }
}

/**
 * One string per (scope, key), for the cache and the in-flight gate. Length-prefixing the scope keeps ("a", "bc")
 * and ("ab", "c") apart whatever characters either contains.
 */
export function callId(scope: string, key: string): string {
  return `${scope.length}:${scope}${key}`;
}
