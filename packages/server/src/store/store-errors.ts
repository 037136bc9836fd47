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
];

/** True when `error` means the database could not be reached or dropped the connection. */
export function isStoreUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code) || code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code)) return true;
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

/** Postgres `lock_not_available`: the claim waited `wait` ms for the in-flight original. */
export function isLockTimeout(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '55P03';
}

/** Postgres `undefined_table`: `migrate()` was not run. */
export function isUndefinedTable(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '42P01';
}
