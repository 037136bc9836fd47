import { canonicalEncode } from './canonical-encode.js';

/**
 * The fingerprint stored with a key: hex SHA-256 of the canonical encoding of `{ path, input }`. A retry with the
 * same key must match it; anything else is a `payload_mismatch`. Web Crypto rather than `node:crypto`, so the
 * middleware runs in edge runtimes (Vercel Edge, Cloudflare Workers, Deno) too.
 */
export async function fingerprint(path: string, rawInput: unknown): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', utf16le(canonicalEncode({ path, input: rawInput })));
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return hex;
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
