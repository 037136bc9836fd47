import { TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import { getIdempotencyErrorData } from './error-formatter.js';

/**
 * Errors that say something about the request itself, so a retry would get the same answer: they are stored and
 * replayed. Transient ones (UNAUTHORIZED, TIMEOUT, TOO_MANY_REQUESTS, CLIENT_CLOSED_REQUEST, every 5xx) are not.
 */
export const DEFAULT_STORED_ERROR_CODES: readonly TRPC_ERROR_CODE_KEY[] = Object.freeze([
  'BAD_REQUEST',
  'PAYMENT_REQUIRED',
  'FORBIDDEN',
  'NOT_FOUND',
  'CONFLICT',
  'PRECONDITION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'UNPROCESSABLE_CONTENT',
]);

/** The `storeErrors` option: the codes to store, or a predicate over the thrown `TRPCError`. */
export type StoreErrorsOption = readonly TRPC_ERROR_CODE_KEY[] | ((error: TRPCError) => boolean);

/**
 * Whether a handler's error is stored and replayed to later calls with the same key.
 * Only a `TRPCError` can be (tRPC turns any other throw into INTERNAL_SERVER_ERROR before a middleware sees it, so a
 * raw throw here is never stored), and never one the middleware itself caused: those must leave the key free.
 */
export function shouldStoreError(error: unknown, policy: StoreErrorsOption): error is TRPCError {
  if (!(error instanceof TRPCError)) return false;
  if (getIdempotencyErrorData(error) !== null) return false;
  return typeof policy === 'function' ? policy(error) === true : policy.includes(error.code);
}
