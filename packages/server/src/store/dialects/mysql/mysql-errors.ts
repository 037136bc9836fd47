import { ClaimLostError, FencedOffError } from '../../connection/step.js';
import { unavailableBy } from '../../unavailable.js';
import type { DialectErrors } from '../dialect.js';

/** MySQL's ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back. */
const DEADLOCK = 1213;

/** The error is a deadlock: its transaction (or autocommit statement) was rolled back whole and can run again. */
export function isDeadlock(error: unknown): boolean {
  return errnoOf(error) === DEADLOCK;
}

/** MySQL's ER_DUP_ENTRY: the key is taken (by a committed row, or one we waited for until it committed). */
export function isDuplicateKey(error: unknown): boolean {
  return errnoOf(error) === 1062;
}

/** What MySQL's and MariaDB's errors (mysql2: `errno`, `code`) mean to the modes. */
export const mysqlErrors: DialectErrors = {
  // Lock wait timeout (1205), or a deadlock that outlived the store's retries (1213).
  isLockTimeout: (error) => errnoOf(error) === 1205 || errnoOf(error) === DEADLOCK,
  // MariaDB's max_statement_time (1969), MySQL's max_execution_time (3024), a KILL QUERY (1317).
  isCancelled: (error) => [1969, 3024, 1317].includes(errnoOf(error) as number),
  isUndefinedTable: (error) => errnoOf(error) === 1146,
  isUnavailable: unavailableBy({
    // mysql2: the server closed the connection, or refused a new one.
    codes: (code) =>
      code === 'PROTOCOL_CONNECTION_LOST' || code === 'ER_CON_COUNT_ERROR' || code === 'ER_SERVER_SHUTDOWN',
    // mysql2 on a dead connection or an ended pool.
    messages: ['connection is in closed state', 'pool is closed'],
  }),
  isFencedOff: (error) => error instanceof FencedOffError,
  isClaimLost: (error) => error instanceof ClaimLostError,
  // ER_SP_DOES_NOT_EXIST: the savepoint is gone.
  isTransactionGone: (error) => errnoOf(error) === 1305,
};

function errnoOf(error: unknown): unknown {
  return (error as { errno?: unknown } | null)?.errno;
}
