/** Hex SHA-256 through Web Crypto, which Node 20, browsers and edge runtimes (Vercel Edge, Workers, Deno) all have. */
export async function sha256Hex(data: BufferSource): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', data);
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

/** The parts of `node:crypto` and `node:buffer` the synchronous hash uses. */
interface NodeCryptoLike {
  createHash(algorithm: 'sha256'): {
    update(text: string, encoding: 'utf16le'): { digest(encoding: 'hex'): string };
  };
  /** One-shot hash (Node ≥ 20.12): no Hash object per call. */
  hash?(algorithm: 'sha256', data: Uint8Array, encoding: 'hex'): string;
}

interface NodeBufferLike {
  Buffer: { from(text: string, encoding: 'utf16le'): Uint8Array };
}

const getBuiltinModule = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
  ?.getBuiltinModule;

/**
 * `node:crypto` where the runtime has it (Node ≥ 20.16, Bun, Deno), found at run time so that no bundle for an edge
 * runtime names a Node builtin. Web Crypto's digest is asynchronous: in Node each call is a job on the thread pool
 * plus promise plumbing, which measured ~7% of a request's server CPU, against ~1 µs for a small input here.
 */
const nodeCrypto = getBuiltinModule?.('node:crypto') as NodeCryptoLike | undefined;
const nodeBuffer = (getBuiltinModule?.('node:buffer') as NodeBufferLike | undefined)?.Buffer;

/**
 * Hex SHA-256 of `text`'s UTF-16LE bytes, synchronously when `node:crypto` is available, else through Web Crypto.
 * The bytes are the same either way (Node's 'utf16le' writes code units as they are, lone surrogates included).
 * The one-shot `hash` of the encoded bytes costs 0.43 µs for a small input against 0.93 µs for a Hash object
 * (`createHash`), measured on Node 20.20: every call pays it, cache hits included.
 */
export function sha256HexOfUtf16(text: string): string | Promise<string> {
  if (nodeCrypto?.hash && nodeBuffer) return nodeCrypto.hash('sha256', nodeBuffer.from(text, 'utf16le'), 'hex');
  return nodeCrypto ? nodeCrypto.createHash('sha256').update(text, 'utf16le').digest('hex') : sha256Hex(utf16le(text));
}

/**
 * UTF-16LE rather than UTF-8: UTF-8 (TextEncoder) would turn every lone surrogate into U+FFFD, so two inputs
 * differing only in an unpaired surrogate (possible after JSON.parse) would hash the same.
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

/** The Web Crypto path alone, whatever the runtime has: lets tests check both paths hash the same bytes. */
export function sha256HexOfUtf16WebCrypto(text: string): Promise<string> {
  return sha256Hex(utf16le(text));
}
