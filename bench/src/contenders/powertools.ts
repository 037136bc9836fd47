import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';
import { TRPCError } from '@trpc/server';
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import { type BenchContext, idempotencyKeyOf } from '../server/headers.ts';
import { t } from '../server/trpc.ts';
import type { RedisCounter } from './redis-counter.ts';

interface Payload {
  key: string;
  body: { path: string; input: unknown };
}

/**
 * AWS Powertools idempotency on its Redis/Valkey persistence layer, wrapped as a tRPC middleware:
 * the key is the Idempotency-Key header (eventKeyJmesPath).
 * First execution: SET NX (in progress) + SET (completed); replay: SET NX (fails) + GET.
 */
export async function powertoolsMiddleware(redisUrl: string, counter: RedisCounter) {
  const client = await createClient({ url: redisUrl }).connect();
  const persistenceStore = new CachePersistenceLayer({ client: counter.wrap(client) });
  // No payloadValidationJmesPath: in 2.35 the cache layer's completion (SET without the validation hash)
  // drops the stored payload hash, so every replay with validation on fails with IdempotencyValidationError.
  const config = new IdempotencyConfig({ eventKeyJmesPath: 'key' });
  // Outside Lambda there is no remaining-time clock: without one, an in-progress record has no expiry and a
  // concurrent duplicate takes it for an orphan and runs the handler again. 10 s plays the role of ours' lease.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 10_000 } as never);
  const run = makeIdempotent(async (_payload: Payload, call: () => Promise<unknown>) => call(), {
    persistenceStore,
    config,
    keyPrefix: 'bench-powertools',
  });
  return t.middleware(async ({ ctx, path, getRawInput, next }) => {
    const key = idempotencyKeyOf(ctx as BenchContext);
    if (!key) throw new TRPCError({ code: 'BAD_REQUEST', message: 'Idempotency-Key missing' });
    let executed: Awaited<ReturnType<typeof next>> | undefined;
    try {
      const data = await run({ key, body: { path, input: await getRawInput() } }, async () => {
        executed = await next();
        if (!executed.ok) throw executed.error;
        return executed.data;
      });
      return executed ?? { ok: true as const, data, marker: middlewareMarker };
    } catch (error) {
      if (error instanceof TRPCError) throw error;
      const name = (error as Error).name;
      if (name === 'IdempotencyAlreadyInProgressError') throw new TRPCError({ code: 'CONFLICT', cause: error });
      if (name === 'IdempotencyValidationError') throw new TRPCError({ code: 'UNPROCESSABLE_CONTENT', cause: error });
      throw new TRPCError({ code: 'SERVICE_UNAVAILABLE', cause: error });
    }
  });
}
