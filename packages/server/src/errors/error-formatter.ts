import type { TRPCError } from '@trpc/server';
import { type IdempotencyReason, isIdempotencyError } from './idempotency-error.js';
import { isKeyAnswer } from './key-answer.js';

/** What `error.data.idempotency` holds when the middleware refused a call. */
export interface IdempotencyErrorData {
  reason: IdempotencyReason;
  /** Present on `in_progress` (409) and `store_unavailable` (503): wait this long before retrying. */
  retryAfterMs?: number;
}

// A TRPCError made by toTRPCError has the IdempotencyError as its direct cause; a few more levels cover an
// app that wraps errors once more, while the bound keeps a cyclic cause chain from looping.
const MAX_CAUSE_DEPTH = 5;

/** Finds the middleware's error behind a tRPC error, or `null` when the error is not about idempotency. */
export function getIdempotencyErrorData(error: unknown): IdempotencyErrorData | null {
  let current: unknown = error;
  for (let depth = 0; depth <= MAX_CAUSE_DEPTH && current instanceof Error; depth++) {
    if (isIdempotencyError(current)) {
      return current.retryAfterMs === undefined
        ? { reason: current.reason }
        : { reason: current.reason, retryAfterMs: current.retryAfterMs };
    }
    current = current.cause;
  }
  return null;
}

/**
 * Adds two fields to every error shape, typed on the client:
 * - `data.idempotency`: `{ reason, retryAfterMs? }` when the middleware refused the call, else `null`;
 * - `data.idempotencyAnswer`: `true` when the error is the key's own outcome (a stored or replayed error, a 422
 *   `payload_mismatch`), `false` for any other error (an auth check's 401 before the middleware, a 409 `in_progress`).
 *   A client whose earlier attempt got no answer keeps the call's outcome unknown until an answer so marked.
 *
 * Use it as `initTRPC.create({ errorFormatter: idempotencyErrorFormatter })`, or call it from your own
 * formatter: `errorFormatter: (opts) => { const shape = idempotencyErrorFormatter(opts); return { ...shape, … } }`.
 */
export function idempotencyErrorFormatter<TShape extends { data: object }>(opts: {
  shape: TShape;
  error: TRPCError;
}): TShape & { data: TShape['data'] & { idempotency: IdempotencyErrorData | null; idempotencyAnswer: boolean } } {
  const { shape, error } = opts;
  return {
    ...shape,
    data: { ...shape.data, idempotency: getIdempotencyErrorData(error), idempotencyAnswer: isKeyAnswer(error) },
  };
}
