import { TRPCError } from '@trpc/server';
import type { Transaction } from 'kysely';
import { shouldStoreError } from '../errors/error-policy.js';
import { IdempotencyError, toTRPCError } from '../errors/idempotency-error.js';
import { markKeyAnswer } from '../errors/key-answer.js';
import type { IdempotencyEventType } from '../events.js';
import { markReplayed, setRetryAfter } from '../http/response-headers.js';
import type { LeaseSteps } from '../modes/steps.js';
import { causeToStore } from '../serialize/stored-cause.js';
import {
  decodeStoredResponse,
  encodeStoredResponse,
  replayOutcome,
  UnstorableResultError,
} from '../serialize/stored-response.js';
import type { Session } from '../store/dialects/dialect.js';
import { createHandlerDb } from '../store/handler-db.js';
import type { CallTrace } from '../telemetry/call-trace.js';
import type { Call, IdempotencyContext, MiddlewareResultLike, NextFn, Runtime } from './call.js';
import { downstreamKey } from './downstream-key.js';
import { oversizedBytes } from './response-limit.js';

/* What the client gets for each outcome: replays, refusals and failures, with their events and headers. */

/** How long a 409 / 503 asks the client to wait before retrying. */
export const RETRY_AFTER_MS = 1000;

export function event(rt: Runtime, call: Call, type: IdempotencyEventType, error?: unknown): void {
  call.trace?.event(type);
  rt.emit?.({
    type,
    scope: call.scope,
    key: call.key,
    path: call.path,
    durationMs: performance.now() - call.startedAt,
    ...(error === undefined ? {} : { error }),
  });
}

export function okResult(data: unknown): MiddlewareResultLike {
  return { ok: true, data, marker: 'middlewareMarker' as never };
}

/** Replays a stored outcome: flags the response, then returns the data or throws the stored error. */
/** Replays a completed row read from the database, and caches it so the next duplicate needs no round trip. */
export function replayRow(rt: Runtime, call: Call, response: string, expiresAt: number): MiddlewareResultLike {
  rt.cache?.set(call.scope, call.key, { fingerprint: call.fingerprint, response, expiresAt });
  return replay(rt, call, response);
}

/** Replays a stored result; a mismatching payload was refused before. */
export function replay(rt: Runtime, call: Call, response: string): MiddlewareResultLike {
  const span = call.trace?.replay();
  try {
    const outcome = decodeStoredResponse(response, rt.options.serializer);
    markReplayed(call.ctx, call.form, call.batchIndex);
    event(rt, call, 'replayed');
    try {
      return okResult(replayOutcome(outcome));
    } catch (stored) {
      throw markKeyAnswer(stored as Error);
    }
  } finally {
    span?.end();
  }
}

/** The handler's outcome is committed under the key: a stored error is marked as the key's answer. */
export function executed(rt: Runtime, call: Call, result: MiddlewareResultLike): MiddlewareResultLike {
  if (!result.ok) markKeyAnswer(result.error);
  event(rt, call, 'executed');
  return result;
}

export function mismatch(rt: Runtime, call: Call): TRPCError {
  event(rt, call, 'mismatch');
  return toTRPCError(
    new IdempotencyError(
      'payload_mismatch',
      call.fromInput
        ? `The idempotency key "${call.key}" that ${call.path} takes from its input ` +
            'was already used with a different procedure or a different fingerprinted input: ' +
            'the same key must come with the same input on every retry'
        : `Idempotency-Key "${call.key}" was already used with a different procedure or input: ` +
            'send a new key for a new request',
    ),
  );
}

export function conflict(rt: Runtime, call: Call): TRPCError {
  event(rt, call, 'conflict');
  if (call.form === 'single') setRetryAfter(call.ctx, RETRY_AFTER_MS);
  return toTRPCError(
    new IdempotencyError(
      'in_progress',
      `A request with Idempotency-Key "${call.key}" is still in progress: retry later with the same key`,
      { retryAfterMs: RETRY_AFTER_MS },
    ),
  );
}

/**
 * A result over `responseLimit`: as deterministic as the handler, so a retry would fail the same way. `error` is
 * the handler's, when what could not be stored is a deterministic error: it is the event's and the failure's cause.
 */
export function responseTooLarge(rt: Runtime, call: Call, bytes: number, error?: TRPCError): TRPCError {
  event(rt, call, 'released', error);
  const { maxResponseBytes } = rt.options;
  const over =
    bytes > maxResponseBytes
      ? `exceeds maxResponseBytes (${maxResponseBytes})`
      : `exceeds the ${rt.store.maxResultBytes} bytes the database takes in one statement ` +
        '(MySQL/MariaDB: (max_allowed_packet - 16 KiB) / 2)';
  const raise = bytes > maxResponseBytes ? 'raise maxResponseBytes' : "raise the server's max_allowed_packet";
  const what = error
    ? `The result (${bytes} bytes: the handler's ${error.code} error, to be stored)`
    : `The result (${bytes} bytes)`;
  return toTRPCError(
    new IdempotencyError(
      'response_too_large',
      `${what} ${over}: nothing was stored and its writes were rolled back; ${raise} or return less`,
      error ? { cause: error } : {},
    ),
  );
}

/** Maps a failure of the claim (nothing of the handler ran yet) to what the client should see. */
export function claimFailure(rt: Runtime, call: Call, error: unknown): TRPCError {
  const { errors } = rt;
  if (errors.isLockTimeout(error) || errors.isCancelled(error)) return conflict(rt, call);
  if (errors.isUnavailable(error)) {
    if (call.form === 'single') setRetryAfter(call.ctx, RETRY_AFTER_MS);
    return toTRPCError(
      new IdempotencyError(
        'store_unavailable',
        'The idempotency store (database) is unreachable; the request was not executed: retry later with the same key',
        { retryAfterMs: RETRY_AFTER_MS, cause: error },
      ),
    );
  }
  if (errors.isUndefinedTable(error)) {
    const table = rt.options.table.qualified;
    return new TRPCError({
      code: 'INTERNAL_SERVER_ERROR',
      message: `The idempotency table ${table} does not exist: run idempotency.migrate() at startup`,
      cause: error,
    });
  }
  return error instanceof TRPCError ? error : new TRPCError({ code: 'INTERNAL_SERVER_ERROR', cause: error });
}

/** A failure after the handler ran: nothing was stored, so a retry with the same key runs again or replays. */
export function completionFailure(rt: Runtime, error: unknown): TRPCError {
  return new TRPCError({
    code: 'INTERNAL_SERVER_ERROR',
    message:
      error instanceof UnstorableResultError
        ? error.message
        : rt.errors.isUnavailable(error)
          ? 'The database connection failed while storing the result: ' +
            'retry with the same key (it replays if the result was stored)'
          : "The handler's transaction could not be committed, nothing was stored: retry with the same key",
    cause: error,
  });
}

/**
 * Transaction mode's completion found its claim gone before COMMIT (DialectErrors.isClaimLost: the general path's
 * guarded completion, or ClaimLostError on MySQL and SQLite): the handler deleted or changed its own key's row.
 * Nothing was committed.
 */
export function claimLostFailure(error: unknown): TRPCError {
  return new TRPCError({
    code: 'INTERNAL_SERVER_ERROR',
    message:
      "The handler deleted or changed its own key's row inside its transaction, so nothing was committed: " +
      'a handler must not write the idempotency table',
    cause: error,
  });
}

/**
 * Transaction mode's prepared completion was gone from its connection (DialectErrors.isPreparedStatementLost): code
 * on the handler's transaction ran `DEALLOCATE` (its claim, prepared on the same connection, proved it there).
 * Nothing was committed.
 */
export function lostCompletionFailure(error: unknown): TRPCError {
  return new TRPCError({
    code: 'INTERNAL_SERVER_ERROR',
    message:
      "The prepared completion was deallocated inside the handler's transaction, so nothing was committed: " +
      "retry with the same key; a handler must not DEALLOCATE the middleware's statements",
    cause: error,
  });
}

/**
 * What the handler finds in `ctx.idempotency`: its transaction on `session`, and `signal` (lease mode's, when its
 * holder can be fenced off). Without one the signal is never aborted, and it is made only when the handler reads it:
 * an AbortController (an EventTarget) costs ~4-5 µs of CPU per call. One signal shared by every call would keep
 * every listener handlers ever added to it.
 */
export function handlerContext(
  rt: Runtime,
  call: Call,
  session: Session,
  takeover: boolean,
  signal?: AbortSignal,
  steps?: LeaseSteps,
): IdempotencyContext<any> {
  let made = signal;
  let db: Transaction<any> | undefined;
  return {
    key: call.key,
    scope: call.scope,
    // Lease mode's steps end and reopen the transaction: `db` is the one open now (steps.ts).
    get db() {
      if (steps) return steps.db;
      db ??= createHandlerDb(rt.db, session.executor);
      return db;
    },
    step: steps ? (name, fn) => steps.run(name, fn) : stepUnavailable,
    takeover,
    downstreamKey: (purpose = '') => downstreamKey(rt.options.table, call.scope, call.key, purpose),
    get signal() {
      made ??= new AbortController().signal;
      return made;
    },
  };
}

function stepUnavailable(name: string): Promise<never> {
  return Promise.reject(
    new Error(
      `ctx.idempotency.step('${name}') needs mode: 'lease': ` +
        "in transaction mode the call's transaction is its only record",
    ),
  );
}

/** Runs the rest of the chain, turning a thrown error into the failed result tRPC itself would produce. */
export async function callNext(
  next: NextFn,
  idempotency: IdempotencyContext<any>,
  trace: CallTrace | undefined,
): Promise<MiddlewareResultLike> {
  try {
    return await (trace ? trace.handler(() => next({ ctx: { idempotency } })) : next({ ctx: { idempotency } }));
  } catch (cause) {
    const error = cause instanceof TRPCError ? cause : new TRPCError({ code: 'INTERNAL_SERVER_ERROR', cause });
    return { ok: false, error, marker: 'middlewareMarker' as never };
  }
}

/**
 * The text to store for a handler's result, or undefined for an error that is not stored. Runs the app's
 * `storeErrors` and `serializer.serialize`, which may throw: callers hold a transaction and must end it then.
 */
export function responseToStore(rt: Runtime, result: MiddlewareResultLike): string | undefined {
  const { serializer, storeErrors } = rt.options;
  if (result.ok) return encodeStoredResponse({ ok: true, data: result.data }, serializer);
  if (!shouldStoreError(result.error, storeErrors)) return undefined;
  const error = { code: result.error.code, message: result.error.message };
  // The cause's fields, for the app's errorFormatter on replays; left out when they do not fit, never refused.
  const cause = causeToStore(result.error.cause, serializer);
  if (cause) {
    const text = encodeStoredResponse({ ok: false, error: { ...error, cause } }, serializer);
    if (oversizedBytes(rt, text) === undefined) return text;
  }
  return encodeStoredResponse({ ok: false, error }, serializer);
}
