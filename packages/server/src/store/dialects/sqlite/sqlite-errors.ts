import { ClaimLostError, FencedOffError } from '../../connection/step.js';
import { unavailableBy } from '../../unavailable.js';
import type { DialectErrors } from '../dialect.js';

/** SQLITE_BUSY (better-sqlite3 and libSQL both name it in `code`): another connection holds the write lock. */
export function isSqliteBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/** What SQLite's errors (better-sqlite3, libSQL: `SQLITE_…` codes, and messages) mean to the modes. */
export const sqliteErrors: DialectErrors = {
  // Busy: another process's write lock outlived `wait`.
  isLockTimeout: isSqliteBusy,
  isCancelled: () => false,
  isUndefinedTable: (error) => {
    const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
    return typeof code === 'string' && code.startsWith('SQLITE') && /no such table/.test(String(message));
  },
  isUnavailable: unavailableBy({
    // The file cannot be opened (its volume is gone, a path that is no file): nothing ran, and a retry succeeds once
    // the file is back; extended codes (SQLITE_CANTOPEN_ISDIR…) too. libSQL: the client was closed.
    codes: (code) => code.startsWith('SQLITE_CANTOPEN') || code === 'CLIENT_CLOSED',
    messages: [
      // better-sqlite3 on a closed database.
      'database connection is not open',
      // better-sqlite3 checks the directory itself before SQLite runs, and throws a plain TypeError.
      'cannot open database because the directory does not exist',
    ],
  }),
  isFencedOff: (error) => error instanceof FencedOffError,
  isClaimLost: (error) => error instanceof ClaimLostError,
  // SQLite's errors carry no finer code than their messages.
  isTransactionGone: (error) => /no transaction is active|no such savepoint/.test(String(errorMessage(error))),
};

function errorMessage(error: unknown): unknown {
  return (error as { message?: unknown } | null)?.message;
}
