import { unavailableBy } from '../../unavailable.js';
import type { DialectErrors } from '../dialect.js';
import { lostPreparedStatement, preparedStatementMismatch } from './postgres-prepared-statements.js';

/**
 * SQLSTATE of a division by zero: the only division in our completions is their guard (`complete`,
 * `completeFenced`), and in the general path's joined claim its check (see JoinedSession.beginClaim).
 */
export const DIVISION_BY_ZERO = '22012';

/**
 * SQLSTATEs of an unusable server: shutdowns, "starting up", too many connections (and class 08, connection
 * exception). A 503 with these is honest: nothing ran and a later retry can succeed.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400']);

/** What Postgres' errors (pg, PGlite, any driver that reports SQLSTATEs in `code`) mean to the modes. */
export const postgresErrors: DialectErrors = {
  // lock_not_available: the claim's lock_timeout (`wait`).
  isLockTimeout: (error) => codeOf(error) === '55P03',
  // query_canceled: a statement timeout, a cancel request.
  isCancelled: (error) => codeOf(error) === '57014',
  isUndefinedTable: (error) => codeOf(error) === '42P01',
  isUnavailable: unavailableBy({
    codes: (code) => code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code),
    // What `pg`, pg-pool and PGlite throw for a dead or unreachable connection (they carry no code).
    messages: [
      'connection terminated',
      'connection timeout',
      'timeout exceeded when trying to connect',
      'timeout expired',
      'not queryable',
      'pglite is closed',
      'client was closed',
      'cannot use a pool after calling end',
      'connection has been discarded',
    ],
  }),
  isFencedOff: (error) => codeOf(error) === DIVISION_BY_ZERO,
  isClaimLost: (error) => codeOf(error) === DIVISION_BY_ZERO,
  // no_active_sql_transaction, invalid_savepoint_specification.
  isTransactionGone: (error) => codeOf(error) === '25P01' || codeOf(error) === '3B001',
  isPreparedStatementMismatch: preparedStatementMismatch,
  isPreparedStatementLost: lostPreparedStatement,
};

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}
