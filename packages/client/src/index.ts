export { generateKey } from './generateKey.js';
export {
  AttemptTimeoutError,
  getIdempotencyData,
  getIdempotencyReason,
  type IdempotencyClientError,
  type IdempotencyErrorData,
  type IdempotencyReason,
  IdentityChangedError,
  isIdempotencyError,
} from './idempotencyError.js';
export { type FetchLike, idempotencyFetch } from './idempotencyFetch.js';
export { type AppHeaders, type HeadersOptions, idempotencyHeaders } from './idempotencyHeaders.js';
export { idempotencyLink } from './idempotencyLink.js';
export type { Jitter } from './internals/backoff.js';
export type { OpenTelemetryApi } from './internals/callSpan.js';
export type { IdempotencyLinkOptions, RetryEvent } from './internals/options.js';
export * from './pendingCallsLink.js';
export { type RetryBudget, type RetryBudgetOptions, retryBudget } from './retryBudget.js';
export type { IdempotencyCallInfo, IdempotencySettledEvent, MutationPath } from './types.js';
