interface CryptoLike {
  randomUUID?: () => string;
  getRandomValues?: <T extends ArrayBufferView | null>(array: T) => T;
}

/**
 * The default key factory: `crypto.randomUUID()`. Browsers expose `randomUUID` only in secure contexts, so a
 * page served over plain HTTP falls back to a v4 UUID built from `crypto.getRandomValues`.
 */
export function generateKey(): string {
  return uuidFrom(globalThis.crypto as CryptoLike | undefined);
}

/** @internal exported for tests, which pass a crypto without `randomUUID`. */
export function uuidFrom(crypto: CryptoLike | undefined): string {
  if (typeof crypto?.randomUUID === 'function') return crypto.randomUUID();
  if (typeof crypto?.getRandomValues !== 'function') {
    throw new Error('idempotencyLink: no Web Crypto API (crypto.getRandomValues) here; pass `generateKey`');
  }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
