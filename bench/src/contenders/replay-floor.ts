import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import { type BenchContext, idempotencyKeyOf } from '../server/headers.ts';
import { t } from '../server/trpc.ts';

/**
 * Not an idempotency implementation: the ceiling of any replay done inside a tRPC middleware. It answers a repeated
 * key from a Map in this process with no fingerprint, scope, expiry, store or header, so a cached replay by any
 * middleware (ours, or a peer with a free store) costs at least what this one does: tRPC's request handling and
 * Node's HTTP stack. Benched in the replay scenario only, to show how far goal 3 can go from inside a middleware.
 *
 * `yieldFirst` (the `replay-floor-yield` contender) waits one turn of the event loop (`setImmediate`) before the
 * lookup, as a peer waits for its store's answer: the server then answers the requests it read in one poll in a
 * burst. A diagnostic of the load, not a design: with the load generator on the same two cores, a burst of answers
 * wakes it once rather than once per answer, which cuts both processes' CPU per request here.
 */
export function replayFloorMiddleware(yieldFirst = false) {
  const done = new Map<string, unknown>();
  return t.middleware(async ({ ctx, getRawInput, next }) => {
    const key = idempotencyKeyOf(ctx as BenchContext);
    // Every contender reads the input (a fingerprint needs it); tRPC caches it for the procedure's parser.
    await getRawInput();
    if (yieldFirst) await new Promise<void>((resolve) => setImmediate(resolve));
    if (key !== undefined && done.has(key)) return { ok: true as const, data: done.get(key), marker: middlewareMarker };
    const result = await next();
    if (key !== undefined && result.ok) done.set(key, result.data);
    return result;
  });
}
