export { generateKey } from './generate-key.js';
export {
  AttemptTimeoutError,
  getIdempotencyData,
  getIdempotencyReason,
  type IdempotencyClientError,
  type IdempotencyErrorData,
  type IdempotencyReason,
  IdentityChangedError,
  isIdempotencyError,
} from './idempotency-error.js';
export { type FetchLike, idempotencyFetch } from './idempotency-fetch.js';
export { type AppHeaders, type HeadersOptions, idempotencyHeaders } from './idempotency-headers.js';
export { idempotencyLink } from './idempotency-link.js';
export { callWithIdempotencyContext } from './internals/ambient-context.js';
export type { Jitter } from './internals/backoff.js';
export type { OpenTelemetryApi } from './internals/call-span.js';
export { hasCrossTabLocks } from './internals/cross-tab-lock.js';
export type { IdempotencyLinkOptions, RetryEvent } from './internals/options.js';
export { isOutcomeUnknown } from './is-outcome-unknown.js';
export type { PendingCallsLinkOptions } from './pending-calls/options.js';
export type { PendingCallsLink, ResumedCall } from './pending-calls/types.js';
export { pendingCallsLink } from './pending-calls-link.js';
export {
  type AsyncStorageLike,
  type AsyncStorageStoreOptions,
  asyncStorageStore,
} from './pending-storage/async-storage-store.js';
export { type IndexedDBStoreOptions, indexedDBStore } from './pending-storage/indexed-db-store.js';
export {
  type LocalStorageStoreOptions,
  localStorageStore,
  type WebStorageLike,
} from './pending-storage/local-storage-store.js';
export type { PendingCall, PendingCallStore } from './pending-storage/pending-call-store.js';
export { type RetryBudget, type RetryBudgetOptions, retryBudget } from './retry-budget.js';
export type { IdempotencyCallInfo, IdempotencySettledEvent, MutationPath } from './types.js';
