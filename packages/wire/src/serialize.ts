/**
 * Writing the idempotency headers as RFC 8941 Structured Fields: what the client sends. Reading them is
 * parse.ts (on structured-field-reader.ts).
 */

/** Serializes an sf-string; throws for characters outside printable ASCII, which a String cannot carry. */
export function serializeString(value: string): string {
  let out = '"';
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) {
      throw new TypeError(
        `Cannot write character U+${c.toString(16).padStart(4, '0').toUpperCase()} at index ${i} ` +
          'into a Structured Field String: only printable ASCII (0x20-0x7E) is allowed',
      );
    }
    if (c === 0x22 || c === 0x5c) out += '\\';
    out += value[i];
  }
  return `${out}"`;
}

/** The `Idempotency-Key` value for one key: an sf-string, e.g. `"8e03978e-…"`. */
export function serializeKeyHeader(key: string): string {
  return serializeString(key);
}

/**
 * The `Idempotency-Keys` value for a batch: an SF Dictionary from `b<batchIndex>` to the key, in ascending index
 * order, e.g. `b0="k1", b2="k2"`.
 */
export function serializeKeysDictionary(keys: ReadonlyMap<number, string> | Readonly<Record<number, string>>): string {
  const entries: [number, string][] =
    keys instanceof Map
      ? [...keys]
      : Object.entries(keys).map(([index, key]): [number, string] => [Number(index), key as string]);
  for (const [index] of entries) {
    if (!Number.isSafeInteger(index) || index < 0) {
      throw new RangeError(`Batch index ${index} is not a non-negative integer`);
    }
  }
  entries.sort((a, b) => a[0] - b[0]);
  return entries.map(([index, key]) => `b${index}=${serializeString(key)}`).join(', ');
}
