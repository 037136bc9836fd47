import { postgresTextProblem } from '../../../serialize/postgres-text.js';

/**
 * Escapes a string as a Postgres escape-string literal (`E'…'`): backslashes and quotes doubled, so it is safe
 * whatever `standard_conforming_strings` says. This lets whole statements travel as one simple-protocol text
 * (several statements per round trip), which parameters would forbid.
 */
export function literal(value: string): string {
  // The middleware refuses such scopes first; this keeps anything else from being stored as another string.
  const problem = postgresTextProblem(value);
  if (problem !== undefined) throw new TypeError(`idempotency: a value for SQL text ${problem}`);
  return `E'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}
