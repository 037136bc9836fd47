/** A non-negative integer for SQL text; refuses anything else instead of embedding it. */
export function int(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`idempotency: expected an integer, got ${value}`);
  return String(value);
}
