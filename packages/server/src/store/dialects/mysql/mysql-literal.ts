import { int } from '../../sql-int.js';

const encoder = new TextEncoder();

/**
 * A MySQL hexadecimal literal of the string's UTF-8 bytes (`X'616263'`). It means the same bytes whatever the
 * server's sql_mode says about backslashes (NO_BACKSLASH_ESCAPES) and whatever the connection's character set,
 * and it needs no escaping at all; the columns it is compared with are binary, so comparison is byte-exact.
 */
export function hexBytes(value: string): string {
  let hex = '';
  for (const byte of encoder.encode(value)) hex += byte.toString(16).padStart(2, '0');
  return `X'${hex}'`;
}

/** A scope, key, path or token as a hex literal; NUL refused as on Postgres, so every dialect accepts the same. */
export function hexText(value: string, maxBytes?: number): string {
  if (value.includes('\u0000')) {
    throw new TypeError('idempotency: a scope, key or path must not contain the NUL character');
  }
  // Outside strict sql_mode MySQL would cut a longer value silently, and two scopes would share a row.
  if (maxBytes !== undefined && encoder.encode(value).length > maxBytes) {
    throw new RangeError(`idempotency: on MySQL a scope is at most ${maxBytes} bytes of UTF-8`);
  }
  return hexBytes(value);
}

/** `innodb_lock_wait_timeout` counts whole seconds: a wait of `ms` rounds up (1..999 ms wait 1 s). */
export function lockWaitSeconds(ms: number): string {
  return int(Math.ceil(ms / 1000));
}
