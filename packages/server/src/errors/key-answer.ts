import { isIdempotencyError } from './idempotency-error.js';

// A registry symbol, as IdempotencyError's brand: a bundle that loads this module twice must still see the mark.
const KEY_ANSWER = Symbol.for('@trpc-idempotency/server:keyAnswer');

// As in getIdempotencyErrorData: a few levels cover an app that wraps the error again; the bound stops a cycle.
const MAX_CAUSE_DEPTH = 5;

/**
 * Marks an error as the key's own outcome: a handler's error the middleware stored (or replays). The client reads the
 * mark to tell such an answer from one that says nothing about the key (an auth layer's 401, a proxy's page).
 */
export function markKeyAnswer<T extends object>(error: T): T {
  (error as { [KEY_ANSWER]?: true })[KEY_ANSWER] = true;
  return error;
}

/**
 * Whether an error is the key's outcome: a stored or replayed error, or a 422 `payload_mismatch` (the key holds
 * another request). Any other error, the middleware's 409 and 503 included, tells nothing of what the key did.
 */
export function isKeyAnswer(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth <= MAX_CAUSE_DEPTH && current instanceof Error; depth++) {
    if (KEY_ANSWER in current) return true;
    if (isIdempotencyError(current)) return current.reason === 'payload_mismatch';
    current = current.cause;
  }
  return false;
}
