import { TRPCClientError } from '@trpc/client';
import { IdentityChangedError } from '../idempotency-error.js';

// A registry symbol: an app bundle that holds two copies of this package must still read one copy's mark.
const OUTCOME_UNKNOWN = Symbol.for('@trpc-idempotency/client:outcomeUnknown');

/**
 * Whether the server's `idempotencyErrorFormatter` marked the error as the key's own outcome (a stored or replayed
 * error, a 422 `payload_mismatch`): an answer about the key, unlike an auth layer's 401 or a proxy's page.
 */
export function isKeyAnswer(error: unknown): boolean {
  if (!(error instanceof TRPCClientError)) return false;
  return (error.data as { idempotencyAnswer?: unknown } | null | undefined)?.idempotencyAnswer === true;
}

/** Marks the error a call ends with when an earlier attempt got no answer and no later one told the key's outcome. */
export function markOutcomeUnknown(error: TRPCClientError<any>): void {
  Object.defineProperty(error, OUTCOME_UNKNOWN, { value: true });
}

export function isMarkedOutcomeUnknown(error: unknown): boolean {
  return typeof error === 'object' && error !== null && OUTCOME_UNKNOWN in error;
}

/**
 * The error of a call refused before it sent anything because its key's earlier call ended outcome-unknown under
 * another identity: still outcome-unknown, so a hook keeps the key and a store keeps the first identity's record.
 */
export function refusedUnderAnotherIdentity(path: string, key: string): TRPCClientError<any> {
  const error = TRPCClientError.from(new IdentityChangedError(path, undefined, key));
  markOutcomeUnknown(error);
  return error;
}
