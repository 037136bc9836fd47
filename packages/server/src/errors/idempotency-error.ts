import { TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';

/** Why the middleware refused or could not run a call; sent to the client in `error.data.idempotency.reason`. */
export type IdempotencyReason =
  | 'key_missing'
  | 'key_invalid'
  | 'payload_mismatch'
  | 'in_progress'
  | 'store_unavailable'
  | 'response_too_large';

/** The tRPC code (and so the HTTP status) of each reason, as fixed by the wire contract. */
export const TRPC_CODE_BY_REASON = {
  key_missing: 'BAD_REQUEST',
  key_invalid: 'BAD_REQUEST',
  payload_mismatch: 'UNPROCESSABLE_CONTENT',
  in_progress: 'CONFLICT',
  store_unavailable: 'SERVICE_UNAVAILABLE',
  response_too_large: 'INTERNAL_SERVER_ERROR',
} as const satisfies Record<IdempotencyReason, TRPC_ERROR_CODE_KEY>;

/**
 * The middleware's own failure. It never reaches tRPC as is: `toTRPCError` wraps it so the code is right and
 * `idempotencyErrorFormatter` can find it again in `cause`.
 */
// A registry symbol, not `instanceof` alone: bundlers (Next.js builds its instrumentation hook and its routes
// separately) can load two copies of this module, and an error from one copy must still be recognised by the other.
const BRAND = Symbol.for('@trpc-idempotency/server:IdempotencyError');

export class IdempotencyError extends Error {
  override readonly name = 'IdempotencyError';
  readonly [BRAND] = true;
  readonly reason: IdempotencyReason;
  /** When the client should try again (409 `in_progress`, 503 `store_unavailable`). */
  // `declare`: no own property unless a delay is given, so spreading or serializing the error shows none.
  declare readonly retryAfterMs?: number;

  constructor(reason: IdempotencyReason, message: string, opts: { retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.reason = reason;
    if (opts.retryAfterMs !== undefined) (this as { retryAfterMs?: number }).retryAfterMs = opts.retryAfterMs;
  }
}

export function isIdempotencyError(value: unknown): value is IdempotencyError {
  return value instanceof IdempotencyError || (typeof value === 'object' && value !== null && BRAND in value);
}

/** Converts at the tRPC boundary: the code follows the reason, the message is kept, `cause` is the original. */
export function toTRPCError(error: IdempotencyError): TRPCError {
  return new TRPCError({ code: TRPC_CODE_BY_REASON[error.reason], message: error.message, cause: error });
}
