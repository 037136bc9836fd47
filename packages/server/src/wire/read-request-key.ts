import { readRequestHeader } from '../http/request-headers.js';
import { parseIdempotencyKey, parseIdempotencyKeys } from './parse-idempotency-key.js';

export const KEY_HEADER = 'Idempotency-Key';
export const KEYS_HEADER = 'Idempotency-Keys';

export interface RequestKey {
  key: string;
  /** `batch` when it came from `Idempotency-Keys`: the replay flag is then a `b<batchIndex>` token. */
  form: 'single' | 'batch';
}

// Every call of a batch reads the same Idempotency-Keys value; remembering the last parse makes a batch of n
// calls parse it once instead of n times. The map is never handed out, so sharing it is safe.
let lastKeysHeader: string | undefined;
let lastKeys: Map<number, string> | undefined;

function parseKeysCached(headerValue: string): Map<number, string> {
  if (headerValue !== lastKeysHeader || lastKeys === undefined) {
    lastKeys = parseIdempotencyKeys(headerValue);
    lastKeysHeader = headerValue;
  }
  return lastKeys;
}

/**
 * The key of the call at `batchIndex`: its `Idempotency-Keys` entry, else a lone `Idempotency-Key`, which applies to
 * batchIndex 0 only (a single call, or the first call of a batch). Undefined when the request carries none for it.
 * Throws `IdempotencyError('key_invalid')` for a malformed header, even one that has no entry for this call.
 */
export function readRequestKey(ctx: unknown, batchIndex: number): RequestKey | undefined {
  const keysHeader = readRequestHeader(ctx, KEYS_HEADER);
  if (keysHeader !== undefined) {
    const key = parseKeysCached(keysHeader).get(batchIndex);
    if (key !== undefined) return { key, form: 'batch' };
  }
  if (batchIndex !== 0) return undefined;
  const keyHeader = readRequestHeader(ctx, KEY_HEADER);
  return keyHeader === undefined ? undefined : { key: parseIdempotencyKey(keyHeader), form: 'single' };
}
