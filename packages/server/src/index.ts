export {
  createIdempotency,
  type Idempotency,
  type IdempotencyContextFor,
  type PurgeExpiredOptions,
} from './create-idempotency.js';
export { type IdempotencyErrorData, idempotencyErrorFormatter } from './errors/error-formatter.js';
export { DEFAULT_STORED_ERROR_CODES, type StoreErrorsOption } from './errors/error-policy.js';
export { IdempotencyError, type IdempotencyReason, isIdempotencyError } from './errors/idempotency-error.js';
export { StoredErrorCause } from './errors/stored-error-cause.js';
export type { IdempotencyEvent, IdempotencyEventType } from './events.js';
export type { IdempotencyContext } from './middleware/call.js';
export type { FromInputOptions } from './middleware/input-source.js';
export type { IdempotencyMode, IdempotencyOptions } from './options.js';
export { defaultSerializer, type Serializer } from './serialize/serializer.js';
export type { PgClientLike, PgPoolLike } from './store/dialects/postgres/pg-pool-like.js';
export type { PostgresOptions } from './store/dialects/postgres/postgres-options.js';
export type { OpenTelemetryApi } from './telemetry/otel-api.js';
