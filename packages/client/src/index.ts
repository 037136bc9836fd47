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
export { callWithIdempotencyContext } from './internals/ambientContext.js';
export type { Jitter } from './internals/backoff.js';
export type { OpenTelemetryApi } from './internals/callSpan.js';
export { hasCrossTabLocks } from './internals/crossTabLock.js';
export type { IdempotencyLinkOptions, RetryEvent } from './internals/options.js';
export { isOutcomeUnknown } from './isOutcomeUnknown.js';
export type { PendingCallsLinkOptions } from './pendingCalls/options.js';
export type { PendingCallsLink, ResumedCall } from './pendingCalls/types.js';
export { pendingCallsLink } from './pendingCallsLink.js';
export {
  type AsyncStorageLike,
  type AsyncStorageStoreOptions,
  asyncStorageStore,
} from './pendingStorage/asyncStorageStore.js';
export { type IndexedDBStoreOptions, indexedDBStore } from './pendingStorage/indexedDBStore.js';
export {
  type LocalStorageStoreOptions,
  localStorageStore,
  type WebStorageLike,
} from './pendingStorage/localStorageStore.js';
export type { PendingCall, PendingCallStore } from './pendingStorage/pendingCallStore.js';
export { type RetryBudget, type RetryBudgetOptions, retryBudget } from './retryBudget.js';
export type { IdempotencyCallInfo, IdempotencySettledEvent, MutationPath } from './types.js';
