import { callId } from '../cache/replay-cache.js';
import { IdempotencyError, isIdempotencyError, toTRPCError } from '../errors/idempotency-error.js';
import { fingerprintInput } from '../fingerprint/fingerprint-input.js';
import type { CallTrace } from '../telemetry/call-trace.js';
import { validateKey } from '../wire/parse-idempotency-key.js';
import { readRequestKey } from '../wire/read-request-key.js';
import type { Call, MiddlewareResultLike, NextFn, Runtime } from './call.js';
import { checkPath, checkScope } from './call-text.js';
import type { InFlightCalls } from './in-flight-calls.js';
import { conflict, event, mismatch, replay } from './outcomes.js';

/** The options tRPC passes a middleware, as far as this one reads them. */
export interface MiddlewareOpts {
  ctx: unknown;
  path: string;
  batchIndex: number;
  getRawInput: () => Promise<unknown>;
  next: (opts?: { ctx: object }) => Promise<unknown>;
  /** Passed in by the telemetry wrapper (telemetry.ts). */
  trace?: CallTrace;
}

export type ModeRunner = (rt: Runtime, call: Call, next: NextFn) => Promise<MiddlewareResultLike>;

/**
 * The middleware function: finds and validates the key, fingerprints the call, replays from the in-process cache
 * when it can (no round trip), lets one call per key through the in-process gate, then hands over to the mode.
 */
export function createMiddlewareFunction(rt: Runtime, gate: InFlightCalls, runMode: ModeRunner) {
  const { options } = rt;
  return async function idempotencyMiddleware(opts: MiddlewareOpts): Promise<unknown> {
    const startedAt = performance.now();
    const { ctx, path, batchIndex } = opts;
    const found = findKey(rt, ctx, batchIndex);
    if (!found) {
      if (!options.required) return opts.next({ ctx: { idempotency: null } });
      throw toTRPCError(
        new IdempotencyError(
          'key_missing',
          `${path} requires an Idempotency-Key header: send a unique key per operation and the same key on every retry`,
        ),
      );
    }
    const scope = checkScope(options.scope({ ctx }), rt.scopeStorage);
    const call: Call = {
      scope,
      key: found.key,
      path: checkPath(path),
      fingerprint: await fingerprintInput(path, opts.getRawInput, options.inputLimits),
      form: found.form,
      batchIndex,
      ctx,
      startedAt,
      deadline: startedAt + options.wait,
      trace: opts.trace,
    };
    const cached = replayFromCache(rt, call);
    if (cached) return cached;
    call.trace?.gate();
    const entered = await gate.enter(callId(scope, call.key), call.fingerprint, call.deadline);
    if (entered.outcome === 'mismatch') throw mismatch(rt, call);
    if (entered.outcome === 'timeout') throw conflict(rt, call);
    try {
      if (entered.waited) {
        event(rt, call, 'waited');
        // The call we waited for may have completed in this process: its result is cached now.
        const completed = replayFromCache(rt, call);
        if (completed) return completed;
      }
      return await runMode(rt, call, opts.next as unknown as NextFn);
    } finally {
      entered.leave();
    }
  };
}

/** A completed result of this process answers without a round trip; the cache lookup already refreshed it. */
function replayFromCache(rt: Runtime, call: Call): MiddlewareResultLike | undefined {
  // The cache counts expiry on this process's monotonic clock, so a wall clock skewed from the database's (or
  // stepped) cannot make it replay an expired key.
  const hit = rt.cache?.get(call.scope, call.key, performance.now());
  if (!hit) return undefined;
  if (hit.fingerprint !== call.fingerprint) throw mismatch(rt, call);
  return replay(rt, call, hit.response);
}

function findKey(rt: Runtime, ctx: unknown, batchIndex: number): { key: string; form: 'single' | 'batch' } | undefined {
  try {
    const custom = rt.options.key;
    if (!custom) return readRequestKey(ctx, batchIndex);
    const key = custom({ ctx, batchIndex });
    if (key === undefined) return undefined;
    return { key: validateKey(key), form: batchIndex === 0 ? 'single' : 'batch' };
  } catch (error) {
    throw isIdempotencyError(error) ? toTRPCError(error) : error;
  }
}
