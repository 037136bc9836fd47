import { TRPCError } from '@trpc/server';
import { postgresTextProblem } from '../serialize/postgres-text.js';

/**
 * The scope `scope` returned, checked to be text Postgres stores exactly: the database, the replay cache and the
 * in-process gate must all tell the same scopes apart.
 *
 * A scope that cannot be stored is a 400, not a 500: it is the same for every retry of the request (a 5xx would be
 * retried for nothing), and in practice it comes from request data — a JSON-decoded claim or parameter can hold
 * `\uD800` or `\u0000`, while HTTP header values cannot.
 */
export function checkScope(scope: unknown): string {
  if (typeof scope !== 'string') {
    throw new TypeError(`idempotency: \`scope\` must return a string, got ${typeof scope}`);
  }
  const problem = postgresTextProblem(scope);
  if (problem !== undefined) {
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message: `idempotency: the scope for this request ${problem}; Postgres text cannot store it exactly, so it cannot be told apart from other scopes`,
    });
  }
  return scope;
}

/** The procedure path is stored too; only a router key that is not well-formed text could fail this. */
export function checkPath(path: string): string {
  const problem = postgresTextProblem(path);
  if (problem !== undefined) throw new TypeError(`idempotency: the procedure path ${JSON.stringify(path)} ${problem}`);
  return path;
}
