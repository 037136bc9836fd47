/** Node socket errors that mean "the server is not there" rather than "the SQL was wrong", on every dialect. */
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

/** What one dialect knows of its driver's "the database is not there" errors. */
export interface UnavailableSigns {
  /** Error codes (`code`) of the driver's own. */
  codes?: (code: string) => boolean;
  /** Lower-case fragments of messages the driver throws without a code. */
  messages?: readonly string[];
}

/**
 * A `DialectErrors.isUnavailable`: true when `error`, or an error it wraps (AggregateError when several addresses
 * refused, a `cause`), means the database could not be reached or dropped the connection: a socket error, or one
 * of `signs`.
 */
export function unavailableBy(signs: UnavailableSigns): (error: unknown) => boolean {
  const messages = signs.messages ?? [];
  return (error) => {
    for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
      const { code, message } = e as { code?: unknown; message?: unknown };
      if (typeof code === 'string' && (NETWORK_CODES.has(code) || signs.codes?.(code))) return true;
      if (typeof message === 'string') {
        const lower = message.toLowerCase();
        if (messages.some((m) => lower.includes(m))) return true;
      }
      e = (e as { errors?: unknown[] }).errors?.[0] ?? (e as { cause?: unknown }).cause;
    }
    return false;
  };
}
