import { Idempotency, IdempotencyError, IdempotencyErrorCodes } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { TRPCError } from '@trpc/server';
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import type { BenchContext } from '../server/headers.ts';
import { t } from '../server/trpc.ts';
import type { RedisCounter } from './redis-counter.ts';

/**
 * @node-idempotency/core with its Redis storage adapter (node-redis 4), wrapped as a tRPC middleware the
 * way its Express/Nest adapters use it: onRequest (SET NX, or GET on a hit) before, onResponse (SET) after.
 */
export async function nodeIdempotencyMiddleware(redisUrl: string, counter: RedisCounter) {
  const storage = new RedisStorageAdapter({ url: redisUrl });
  await storage.connect();
  counter.wrapMethods(storage as unknown as Record<string, unknown>, ['setIfNotExists', 'set', 'get']);
  const idempotency = new Idempotency(storage, { cacheKeyPrefix: 'bench-node-idempotency', enforceIdempotency: true });
  return t.middleware(async ({ ctx, path, getRawInput, next }) => {
    const req = {
      headers: (ctx as BenchContext).req.headers as Record<string, unknown>,
      path,
      method: 'POST',
      body: (await getRawInput()) as Record<string, unknown>,
    };
    let cached: Awaited<ReturnType<typeof idempotency.onRequest>>;
    try {
      cached = await idempotency.onRequest(req);
    } catch (error) {
      if (!(error instanceof IdempotencyError)) throw new TRPCError({ code: 'SERVICE_UNAVAILABLE', cause: error });
      if (error.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS) throw new TRPCError({ code: 'CONFLICT' });
      if (error.code === IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH) {
        throw new TRPCError({ code: 'UNPROCESSABLE_CONTENT' });
      }
      throw new TRPCError({ code: 'BAD_REQUEST', cause: error });
    }
    if (cached) {
      if (cached.error) throw new TRPCError({ code: 'BAD_REQUEST', message: String(cached.error) });
      return { ok: true as const, data: cached.body, marker: middlewareMarker };
    }
    const result = await next();
    await idempotency.onResponse(req, result.ok ? { body: result.data } : { error: result.error.code });
    return result;
  });
}
