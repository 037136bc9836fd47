/** Node socket errors that mean "the server is not there" rather than "the SQL was wrong". */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
  // mysql2: the server closed the connection, or refused a new one.
  'PROTOCOL_CONNECTION_LOST',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  // libSQL: the client was closed.
  'CLIENT_CLOSED',
]);

/**
 * SQLSTATEs of an unusable server: class 08 (connection exception), shutdowns, "starting up", too many
 * connections. A 503 with these is honest: nothing ran and a later retry can succeed.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400']);

/** Messages `pg` and PGlite use for a dead or unreachable connection (they carry no code). */
const UNAVAILABLE_MESSAGES = [
  'connection terminated',
  'connection timeout',
  'timeout exceeded when trying to connect',
  'timeout expired',
  'not queryable',
  'pglite is closed',
  'client was closed',
  'cannot use a pool after calling end',
  'connection has been discarded',
  // mysql2 on a dead connection or an ended pool; better-sqlite3 on a closed database.
  'connection is in closed state',
  'pool is closed',
  'database connection is not open',
  // better-sqlite3 checks the directory itself before SQLite runs, and throws a plain TypeError.
  'cannot open database because the directory does not exist',
];

/** True when `error` means the database could not be reached or dropped the connection. */
export function isStoreUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code) || code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code)) return true;
      // SQLite: the file cannot be opened (its volume is gone, a path that is no file): nothing ran, and a retry
      // succeeds once the file is back. Extended codes (SQLITE_CANTOPEN_ISDIR…) too.
      if (code.startsWith('SQLITE_CANTOPEN')) return true;
    }
    if (typeof message === 'string') {
      const lower = message.toLowerCase();
      if (UNAVAILABLE_MESSAGES.some((m) => lower.includes(m))) return true;
    }
    // AggregateError (several addresses refused) and wrapped causes.
    const inner = (e as { errors?: unknown[]; cause?: unknown }).errors?.[0] ?? (e as { cause?: unknown }).cause;
    e = inner;
  }
  return false;
}

/**
 * The claim waited `wait` for the in-flight original: Postgres `lock_not_available`; MySQL lock wait timeout
 * (1205) or a deadlock that outlived the store's retries (1213); SQLite busy (another process's write lock).
 */
export function isLockTimeout(error: unknown): boolean {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown };
  return (
    code === '55P03' || errno === 1205 || errno === 1213 || (typeof code === 'string' && code.startsWith('SQLITE_BUSY'))
  );
}

/**
 * The statement was cancelled: Postgres `query_canceled` (a statement timeout, a cancel request); MariaDB's
 * max_statement_time (1969), MySQL's max_execution_time (3024), a KILL QUERY (1317). At the claim nothing of the
 * handler ran: the call answers 409 like a lock timeout. A handler's own cancelled statement is the handler's error.
 */
export function isCancelled(error: unknown): boolean {
  const { code, errno } = (error ?? {}) as { code?: unknown; errno?: unknown };
  return code === '57014' || errno === 1969 || errno === 3024 || errno === 1317;
}

/** `migrate()` was not run: Postgres `undefined_table`, MySQL 1146, SQLite "no such table". */
export function isUndefinedTable(error: unknown): boolean {
  const { code, errno, message } = (error ?? {}) as { code?: unknown; errno?: unknown; message?: unknown };
  return (
    code === '42P01' ||
    errno === 1146 ||
    (typeof code === 'string' &&
      code.startsWith('SQLITE') &&
      typeof message === 'string' &&
      /no such table/.test(message))
  );
}
