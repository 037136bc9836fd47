import { createHash } from 'node:crypto';
import { canonicalEncode } from './canonical-encode.js';

/**
 * The fingerprint stored with a key: hex SHA-256 of the canonical encoding of `{ path, input }`. A retry with the
 * same key must match it; anything else is a `payload_mismatch`.
 */
export function fingerprint(path: string, rawInput: unknown): string {
  // UTF-16LE rather than UTF-8: UTF-8 would turn every lone surrogate into U+FFFD, so two inputs differing only
  // in an unpaired surrogate (possible after JSON.parse) would hash the same.
  return createHash('sha256')
    .update(canonicalEncode({ path, input: rawInput }), 'utf16le')
    .digest('hex');
}
