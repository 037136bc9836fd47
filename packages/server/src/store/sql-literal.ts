/**
 * Escapes a string as a Postgres escape-string literal (`E'…'`): backslashes and quotes doubled, so it is safe
 * whatever `standard_conforming_strings` says. This lets whole statements travel as one simple-protocol text
 * (several statements per round trip), which parameters would forbid.
 */
export function literal(value: string): string {
  if (value.includes('\u0000')) {
    // Postgres text cannot hold NUL; serialized responses escape it (`\u0000` in JSON), so only raw
    // scopes or keys can get here.
    throw new TypeError('idempotency: a scope, key or path must not contain the NUL character');
  }
  return `E'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

/** A non-negative integer for SQL text; refuses anything else instead of embedding it. */
export function int(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`idempotency: expected an integer, got ${value}`);
  return String(value);
}
