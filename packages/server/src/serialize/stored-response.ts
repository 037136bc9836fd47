import { TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import type { StoredErrorCause } from '../errors/stored-error-cause.js';
import { DeferredValueError, findDeferred } from './deferred-values.js';
import { defaultSerializer, type Serializer } from './serializer.js';
import { restoreCause, type StoredCause } from './stored-cause.js';

/**
 * What a completed call left behind: its result, or the deterministic error it threw. Storing, an error's `cause`
 * is what `causeToStore` made of it; read back, the replayed cause (absent from rows of older versions).
 */
export type StoredOutcome =
  | { ok: true; data: unknown }
  | { ok: false; error: { code: TRPC_ERROR_CODE_KEY; message: string; cause?: StoredCause | StoredErrorCause } };

// Bumped if the envelope ever changes, so rows written by an older version are still read correctly. An error's
// `cause` was added without a bump: older versions read such a row and ignore it (a rolling deploy keeps working).
const FORMAT_VERSION = 1;

/**
 * The exact text stored in the `response` column: a JSON envelope around the serializer's output.
 * JSON escapes U+0000 and lone surrogates, so the text is valid for a Postgres `text` column and reads back
 * byte for byte (unlike `jsonb`, which would reorder keys and reject "\u0000").
 */
export function encodeStoredResponse(outcome: StoredOutcome, serializer: Serializer): string {
  if (outcome.ok) {
    try {
      return encodeResult(outcome.data, serializer);
    } catch (error) {
      throw new UnstorableResultError(error);
    }
  }
  const { code, message, cause } = outcome.error;
  return JSON.stringify({ v: FORMAT_VERSION, ok: false, error: cause ? { code, message, cause } : { code, message } });
}

/** A result the serializer could not turn into stored text that reads back: the call fails, nothing commits. */
export class UnstorableResultError extends Error {
  constructor(cause: unknown) {
    super(`The result cannot be stored, so nothing was committed: ${(cause as Error | null)?.message ?? cause}`, {
      cause,
    });
    this.name = 'UnstorableResultError';
  }
}

function encodeResult(result: unknown, serializer: Serializer): string {
  // The default serializer finds a deferred value on its way; another one might write it as {}: look first.
  const deferred = serializer === defaultSerializer ? undefined : findDeferred(result);
  if (deferred) throw deferredValue(deferred);
  let data: unknown;
  try {
    data = serializer.serialize(result);
  } catch (error) {
    throw error instanceof DeferredValueError ? deferredValue(findDeferred(result) ?? 'a deferred value') : error;
  }
  // JSON would write a Promise as {}: every replay would answer {} instead of the result.
  if (typeof (data as { then?: unknown } | null)?.then === 'function') {
    throw new TypeError('serializer.serialize returned a Promise: it must return the serialized data itself');
  }
  const text = JSON.stringify({ v: FORMAT_VERSION, ok: true, data });
  // A serializer that cannot read back what it wrote (superjson and a Buffer) would fail every replay of a result
  // that committed: the call fails now instead, and rolls back. The default serializer reads back all it writes
  // (its property tests), so only another one pays for the check.
  if (serializer !== defaultSerializer) {
    try {
      serializer.deserialize((JSON.parse(text) as { data: unknown }).data);
    } catch (error) {
      throw new TypeError(
        'the serializer cannot read back the result it wrote, so no replay could answer it ' +
          `(${(error as Error | null)?.message ?? error})`,
        { cause: error },
      );
    }
  }
  return text;
}

function deferredValue(where: string): TypeError {
  return new TypeError(
    `the result holds ${where}, which tRPC streams after the call returned: a replay could not answer what it ` +
      'settles to. Await it in the handler (collect an async iterable into an array) before returning',
  );
}

function corrupt(detail: string): Error {
  return new Error(`Stored idempotency response cannot be read (${detail}); was it written by another tool?`);
}

/** Reads what `encodeStoredResponse` wrote, with the same serializer. */
export function decodeStoredResponse(text: string, serializer: Serializer): StoredOutcome {
  let envelope: unknown;
  try {
    envelope = JSON.parse(text);
  } catch (error) {
    throw corrupt(`not JSON: ${(error as Error).message}`);
  }
  if (typeof envelope !== 'object' || envelope === null) throw corrupt('not an object');
  const e = envelope as { v?: unknown; ok?: unknown; data?: unknown; error?: unknown };
  if (e.v !== FORMAT_VERSION) throw corrupt(`unknown format version ${JSON.stringify(e.v)}`);
  if (e.ok === true) return { ok: true, data: serializer.deserialize(e.data) };
  if (e.ok !== false) throw corrupt('no ok flag');
  const error = e.error as { code?: unknown; message?: unknown; cause?: unknown } | null | undefined;
  if (typeof error?.code !== 'string' || typeof error.message !== 'string') throw corrupt('malformed error');
  const code = error.code as TRPC_ERROR_CODE_KEY;
  const cause = error.cause === undefined ? undefined : restoreCause(error.cause, serializer);
  return { ok: false, error: cause ? { code, message: error.message, cause } : { code, message: error.message } };
}

/** Hands a stored outcome back to tRPC: the data, or the stored error thrown again. */
export function replayOutcome(outcome: StoredOutcome): unknown {
  if (outcome.ok) return outcome.data;
  const { code, message, cause } = outcome.error;
  throw new TRPCError({ code, message, cause });
}
