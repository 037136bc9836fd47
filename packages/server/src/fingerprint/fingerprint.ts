import { canonicalEncode, canonicalEncodeAsync, DEFAULT_ENCODE_LIMITS, type EncodeLimits } from './canonical-encode.js';
import { sha256Hex } from './sha256.js';

/**
 * The fingerprint stored with a key: hex SHA-256 of the canonical encoding of `{ path, input }`. A retry with the
 * same key must match it; anything else is a `payload_mismatch`. Web Crypto rather than `node:crypto`, so the
 * middleware runs in edge runtimes (Vercel Edge, Cloudflare Workers, Deno) too.
 */
export async function fingerprint(
  path: string,
  rawInput: unknown,
  limits: EncodeLimits = DEFAULT_ENCODE_LIMITS,
): Promise<string> {
  // Exactly the encoding of `{ path, input }` (keys sorted, an undefined input omitted), built here so that the
  // depth limit counts the input's own levels.
  const input = rawInput === undefined ? '' : `s5:input${await canonicalEncodeAsync(rawInput, limits)}`;
  return sha256Hex(utf16le(`{${input}s4:path${canonicalEncode(path)}}`));
}

/**
 * UTF-16LE rather than UTF-8: UTF-8 (TextEncoder) would turn every lone surrogate into U+FFFD, so two inputs
 * differing only in an unpaired surrogate (possible after JSON.parse) would hash the same. Same bytes as
 * `Buffer.from(text, 'utf16le')`, so fingerprints stored before the switch from `node:crypto` still match.
 */
function utf16le(text: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    bytes[2 * i] = unit & 0xff;
    bytes[2 * i + 1] = unit >>> 8;
  }
  return bytes;
}
