import {
  canonicalEncode,
  canonicalEncodeAsync,
  canonicalEncodeWithoutBlobs,
  DEFAULT_ENCODE_LIMITS,
  type EncodeLimits,
} from './canonical-encode.js';
import { sha256HexOfUtf16 } from './sha256.js';

/**
 * The fingerprint stored with a key: hex SHA-256 of the canonical encoding of `{ path, input }`. A retry with the
 * same key must match it; anything else is a `payload_mismatch`. Synchronous for plain data where `node:crypto`
 * exists (every call pays it, cache hits included); through Web Crypto, asynchronous, in edge runtimes (Vercel
 * Edge, Cloudflare Workers) and for Blobs, whose bytes are read first. Both give the same hex.
 */
export function fingerprint(
  path: string,
  rawInput: unknown,
  limits: EncodeLimits = DEFAULT_ENCODE_LIMITS,
): string | Promise<string> {
  if (rawInput === undefined) return sha256HexOfUtf16(encodeCall(path, ''));
  const input = canonicalEncodeWithoutBlobs(rawInput, limits);
  if (input === undefined) return fingerprintWithBlobs(path, rawInput, limits);
  return sha256HexOfUtf16(encodeCall(path, `s5:input${input}`));
}

async function fingerprintWithBlobs(path: string, rawInput: unknown, limits: EncodeLimits): Promise<string> {
  return sha256HexOfUtf16(encodeCall(path, `s5:input${await canonicalEncodeAsync(rawInput, limits)}`));
}

/**
 * Exactly the encoding of `{ path, input }` (keys sorted, an undefined input omitted), built here so that the depth
 * limit counts the input's own levels.
 */
function encodeCall(path: string, input: string): string {
  return `{${input}s4:path${canonicalEncode(path)}}`;
}
