import { TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';

/** Why the server's idempotency middleware refused or failed a call (DESIGN.md, Wire contract). */
export type IdempotencyReason =
  | 'key_missing'
  | 'key_invalid'
  | 'payload_mismatch'
  | 'in_progress'
  | 'store_unavailable'
  | 'response_too_large';

/** What `idempotencyErrorFormatter` puts in `error.data.idempotency`. */
export interface IdempotencyErrorData {
  reason: IdempotencyReason;
  /** How long to wait before retrying, for `in_progress` and `store_unavailable`. */
  retryAfterMs?: number;
}

/** A `TRPCClientError` that carries the middleware's `error.data.idempotency`. */
export interface IdempotencyClientError extends Omit<TRPCClientError<AnyRouter>, 'data'> {
  readonly data: { code: string; httpStatus: number; path?: string; idempotency: IdempotencyErrorData };
}

/** Reads `error.data.idempotency` from a `TRPCClientError`, or `undefined` when it has none. */
export function getIdempotencyData(error: unknown): IdempotencyErrorData | undefined {
  if (!(error instanceof TRPCClientError)) return undefined;
  const idempotency: unknown = (error.data as Record<string, unknown> | null | undefined)?.idempotency;
  if (typeof idempotency !== 'object' || idempotency === null) return undefined;
  const { reason, retryAfterMs } = idempotency as Record<string, unknown>;
  if (typeof reason !== 'string') return undefined;
  return typeof retryAfterMs === 'number'
    ? { reason: reason as IdempotencyReason, retryAfterMs }
    : { reason: reason as IdempotencyReason };
}

/** The idempotency reason of a failed call (`'payload_mismatch'`, `'in_progress'`, …), if it has one. */
export function getIdempotencyReason(error: unknown): IdempotencyReason | undefined {
  return getIdempotencyData(error)?.reason;
}

/**
 * Whether a call failed because of the idempotency middleware, optionally for one reason:
 * `if (isIdempotencyError(err, 'payload_mismatch')) …` — a key was reused for a different request.
 */
export function isIdempotencyError(error: unknown, reason?: IdempotencyReason): error is IdempotencyClientError {
  const data = getIdempotencyData(error);
  return data !== undefined && (reason === undefined || data.reason === reason);
}

/** The cause of the error a call gets when one attempt hung past `attemptTimeoutMs` and no retry followed. */
export class AttemptTimeoutError extends Error {
  override name = 'AttemptTimeoutError';
  constructor(readonly timeoutMs: number) {
    super(`The attempt got no answer within ${timeoutMs} ms (attemptTimeoutMs) and was aborted`);
  }
}

/**
 * The cause of the error a call gets when the identity named by `idempotencyLink`'s `identity` (or `pendingCallsLink`'s
 * `user`) changed while it was retrying (another user signed in, or the session ended): nothing more was sent, and its
 * outcome is unknown. A later call that reuses the key under another identity (a "try again") gets it too, before
 * anything is sent: the key's earlier call may have run under the first identity, and only that one may send it again.
 */
export class IdentityChangedError extends Error {
  override name = 'IdentityChangedError';
  /**
   * @param key set when a new call reused the key of a call left outcome-unknown under another identity
   */
  constructor(path: string, cause?: unknown, key?: string) {
    super(
      key === undefined
        ? `${path}: the identity changed while the call was retrying, so it was not sent again under the new one; ` +
            'an earlier attempt may have run: resume it under the identity it started with'
        : `${path}: key ${key} belongs to a call whose outcome is unknown under another identity, so nothing was ` +
            'sent under this one; it may have run: resume it (or try again) once that identity is back',
      { cause },
    );
  }
}
