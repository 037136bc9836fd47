import type { CallTrace } from '../telemetry/call-trace.js';
import { validateKey } from '../wire/parse-idempotency-key.js';
import { readRequestKey } from '../wire/read-request-key.js';
import type { Runtime } from './call.js';

/** The options tRPC passes a middleware, as far as this one reads them. */
export interface MiddlewareOpts {
  ctx: unknown;
  path: string;
  /** The input as the validators before this middleware left it: parsed after `.input()`, else undefined. */
  input: unknown;
  batchIndex: number;
  getRawInput: () => Promise<unknown>;
  next: (opts?: { ctx: object }) => Promise<unknown>;
  /** Passed in by the telemetry wrapper (trace-calls.ts). */
  trace?: CallTrace;
}

/** A call's key and where it came from. */
export interface FoundKey {
  key: string;
  /** `batch` when it came from `Idempotency-Keys`: the replay flag is then a `b<batchIndex>` token. */
  form: 'single' | 'batch';
  /** It came from the input (`fromInput`'s `key`). */
  fromInput?: true;
}

/**
 * Where a middleware takes a call's key and what its fingerprint covers besides the path: the request headers and
 * the raw input (`idempotency.middleware`), or the typed input (`idempotency.fromInput()`). Chosen when the
 * middleware is made, so a call pays only for its own source.
 */
export interface CallSource {
  /** The call's key, undefined when it has none. Throws `IdempotencyError('key_invalid')` for one that is not a key. */
  key(opts: MiddlewareOpts): FoundKey | undefined;
  /** The message of the 400 `key_missing` for a call without a key. */
  missing(path: string): string;
  /** What the fingerprint covers besides the path. */
  fingerprinted(opts: MiddlewareOpts): unknown;
}

/** Keys from the `Idempotency-Key(s)` headers (or the `key` option), fingerprints over the raw input. */
export function headerSource(rt: Runtime): CallSource {
  const custom = rt.options.key;
  return {
    key: custom
      ? ({ ctx, batchIndex }) => {
          const key = custom({ ctx, batchIndex });
          return key === undefined ? undefined : { key: validateKey(key), form: formOf(batchIndex) };
        }
      : ({ ctx, batchIndex }) => readRequestKey(ctx, batchIndex),
    missing: (path) =>
      `${path} requires an Idempotency-Key header: send a unique key per operation and the same key on every retry`,
    fingerprinted: ({ getRawInput }) => getRawInput(),
  };
}

/** A key that came from elsewhere than the headers answers like a lone `Idempotency-Key` in a single call. */
export function formOf(batchIndex: number): FoundKey['form'] {
  return batchIndex === 0 ? 'single' : 'batch';
}
