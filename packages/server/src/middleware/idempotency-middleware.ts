import { callId } from '../cache/replay-cache.js';
import { IdempotencyError, isIdempotencyError, toTRPCError } from '../errors/idempotency-error.js';
import { fingerprintInput } from '../fingerprint/fingerprint-input.js';
import type { Call, MiddlewareResultLike, NextFn, Runtime } from './call.js';
import type { CallSource, FoundKey, MiddlewareOpts } from './call-source.js';
import { checkPath, checkScope } from './call-text.js';
import type { InFlightCalls } from './in-flight-calls.js';
import { conflict, event, mismatch, replay } from './outcomes.js';

export type ModeRunner = (rt: Runtime, call: Call, next: NextFn) => Promise<MiddlewareResultLike>;

/**
 * The middleware function: finds and validates the key, fingerprints the call, replays from the in-process cache
 * when it can (no round trip), lets one call per key through the in-process gate, then hands over to the mode.
 * `source` says where the key comes from and what the fingerprint covers (headers and raw input, or the typed input).
 */
export function createMiddlewareFunction(rt: Runtime, gate: InFlightCalls, runMode: ModeRunner, source: CallSource) {
  const { options } = rt;
  return async function idempotencyMiddleware(opts: MiddlewareOpts): Promise<unknown> {
    const startedAt = performance.now();
    const { ctx, path, batchIndex } = opts;
    const found = findKey(source, opts);
    if (!found) {
      if (!options.required) return opts.next({ ctx: { idempotency: null } });
      throw toTRPCError(new IdempotencyError('key_missing', source.missing(path)));
    }
    const scope = checkScope(options.scope({ ctx }), rt.scopeStorage);
    const call: Call = {
      scope,
      key: found.key,
      path: checkPath(path),
      fingerprint: await fingerprintInput(path, await source.fingerprinted(opts), options.inputLimits),
      form: found.form,
      fromInput: found.fromInput === true,
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

function findKey(source: CallSource, opts: MiddlewareOpts): FoundKey | undefined {
  try {
    return source.key(opts);
  } catch (error) {
    throw isIdempotencyError(error) ? toTRPCError(error) : error;
  }
}
