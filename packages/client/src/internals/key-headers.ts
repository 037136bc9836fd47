import {
  parseStringDictionary,
  parseStringItem,
  serializeKeyHeader,
  serializeKeysDictionary,
} from '@trpc-idempotency/wire';

export const KEY_HEADER = 'Idempotency-Key';
export const KEYS_HEADER = 'Idempotency-Keys';

/** A key is 1–255 characters of visible ASCII (DESIGN.md, Wire contract). */
const VISIBLE_ASCII = /^[\x21-\x7e]{1,255}$/;

export function isValidKey(key: unknown): key is string {
  // A number would pass the pattern as its text, and then no header would carry it: refused like any other non-key.
  return typeof key === 'string' && VISIBLE_ASCII.test(key);
}

/** A rejected key as an error shows it: a string quoted, anything else with its type. */
export function keyText(key: unknown): string {
  return typeof key === 'string' ? JSON.stringify(key) : `${String(key)} (${typeof key})`;
}

/** `Idempotency-Key` for one operation: the key as an SF String. */
export function encodeKeyHeader(key: string): string {
  assertKey(key);
  return serializeKeyHeader(key);
}

/** `Idempotency-Keys` for a batch: `b<batchIndex>="<key>"` for each keyed operation, in index order. */
export function encodeKeysHeader(keys: ReadonlyMap<number, string>): string {
  for (const key of keys.values()) assertKey(key);
  return serializeKeysDictionary(keys);
}

/**
 * Reads `Idempotency-Key` the way the server does (DESIGN.md, Wire contract): a quoted value is an SF
 * String item, anything else is the raw key. Kept beside the encoder so the conformance vectors pin
 * both directions of the client's wire format.
 */
export function parseKeyHeader(header: string): string {
  const trimmed = header.trim();
  const key = trimmed.startsWith('"') ? parseStringItem(trimmed) : trimmed;
  assertKey(key);
  return key;
}

/** Reads `Idempotency-Keys` into batch index → key, as the server does: every member is `b<index>="<key>"`. */
export function parseKeysHeader(header: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const [name, key] of parseStringDictionary(header)) {
    const m = /^b(0|[1-9]\d*)$/.exec(name);
    if (!m || key === null) throw new TypeError(`Idempotency-Keys member ${name} is not b<index>="<key>"`);
    assertKey(key);
    out.set(Number(m[1]), key);
  }
  return out;
}

function assertKey(key: string): void {
  if (!isValidKey(key)) {
    throw new TypeError(
      `Invalid idempotency key ${JSON.stringify(key)}: a key is 1–255 characters of visible ASCII (0x21–0x7E)`,
    );
  }
}
