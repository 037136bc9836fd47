import { TRPCError } from '@trpc/server';
import { postgresTextProblem } from '../serialize/postgres-text.js';
import { utf8Bytes } from '../serialize/utf8-bytes.js';
import { MAX_SCOPE_BYTES, type StoreDialect } from '../store/dialects/dialect.js';

/** What `checkScope` needs to know of the dialect: its name, for the message. */
export type ScopeStorage = Pick<StoreDialect, 'name'>;

/**
 * The scope `scope` returned, checked to be text every dialect stores exactly (UTF-8 without NUL, as Postgres text)
 * and at most `MAX_SCOPE_BYTES` long (Postgres' primary-key index and MySQL's column hold no more): the same scopes
 * are accepted everywhere. The database, the replay cache and the in-process gate must all tell the same scopes
 * apart, and MySQL outside strict mode would cut a longer one.
 *
 * A scope that cannot be stored is a 400, not a 500: it is the same for every retry of the request (a 5xx would be
 * retried for nothing), and in practice it comes from request data — a JSON-decoded claim or parameter can hold
 * `\uD800` or `\u0000`, or be long, while HTTP header values cannot hold the first two.
 */
export function checkScope(scope: unknown, storage: ScopeStorage = { name: 'postgres' }): string {
  if (typeof scope !== 'string') {
    throw new TypeError(`idempotency: \`scope\` must return a string, got ${typeof scope}`);
  }
  const problem = postgresTextProblem(scope);
  if (problem !== undefined) {
    // Other dialects refuse the same scopes as Postgres, so that every dialect accepts the same ones.
    const where =
      storage.name === 'postgres'
        ? 'Postgres text'
        : 'the idempotency table (UTF-8 text without NUL on every database)';
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message:
        `idempotency: the scope for this request ${problem}; ${where} cannot store it exactly, ` +
        'so it cannot be told apart from other scopes',
    });
  }
  const bytes = utf8Bytes(scope, MAX_SCOPE_BYTES);
  if (bytes > MAX_SCOPE_BYTES) {
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message: `idempotency: the scope for this request is ${bytes} bytes of UTF-8; ${SCOPE_LIMIT[storage.name]}`,
    });
  }
  return scope;
}

/** Why a longer scope is refused, per dialect: each message names only the database at hand. */
const SCOPE_LIMIT: Record<StoreDialect['name'], string> = {
  postgres:
    `the Postgres table holds a scope of at most ${MAX_SCOPE_BYTES} bytes ` +
    '(an entry of its primary-key index holds at most 2704, scope and key together)',
  mysql: `the MySQL/MariaDB table holds a scope of at most ${MAX_SCOPE_BYTES} bytes`,
  sqlite:
    `the idempotency table holds a scope of at most ${MAX_SCOPE_BYTES} bytes, ` +
    'on SQLite as on the other databases, so that each accepts the same scopes',
};

/** The procedure path is stored too; only a router key that is not well-formed text could fail this. */
export function checkPath(path: string): string {
  const problem = postgresTextProblem(path);
  if (problem !== undefined) throw new TypeError(`idempotency: the procedure path ${JSON.stringify(path)} ${problem}`);
  return path;
}
