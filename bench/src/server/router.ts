import type { Kysely } from 'kysely';
import type pg from 'pg';
import { z } from 'zod';
import type { ServerConfig } from '../contenders/contender-spec.ts';
import type { RedisCounter } from '../contenders/redis-counter.ts';
import { type DialectRemote, dialectLight, dialectPayment } from '../scenarios/dialects.ts';
import { type BenchDB, lightHandler, paymentHandler } from './handlers.ts';
import { type BenchContext, idempotencyKeyOf } from './headers.ts';
import { type BenchMiddleware, t } from './trpc.ts';

const paymentInput = z.object({ accountId: z.number().int(), amount: z.number().int() });

async function guardFor(config: ServerConfig, db: Kysely<any>, pool: pg.Pool, redis: RedisCounter) {
  const { spec } = config;
  switch (spec.kind) {
    case 'plain':
      return undefined;
    case 'classic':
      return (await import('../contenders/classic.ts')).classicMiddleware(pool) as BenchMiddleware;
    case 'classic-kysely':
      return (await import('../contenders/classic.ts')).classicKyselyMiddleware(db) as BenchMiddleware;
    case 'powertools':
      return (await (
        await import('../contenders/powertools.ts')
      ).powertoolsMiddleware(config.redisUrl, redis)) as BenchMiddleware;
    case 'node-idempotency':
      return (await (
        await import('../contenders/node-idempotency.ts')
      ).nodeIdempotencyMiddleware(config.redisUrl, redis)) as BenchMiddleware;
    case 'ours':
      return (await import('../contenders/ours.ts')).oursMiddleware(spec, db, pool);
    case 'replay-floor':
      return (await import('../contenders/replay-floor.ts')).replayFloorMiddleware(
        spec.name.endsWith('-yield'),
      ) as BenchMiddleware;
  }
}

/** The same two mutations behind whichever guard the contender uses, plus an unguarded no-op. */
export async function buildRouter(config: ServerConfig, db: Kysely<BenchDB>, pool: pg.Pool, redis: RedisCounter) {
  const guard = await guardFor(config, db, pool, redis);
  const guarded = guard ? t.procedure.use(guard) : t.procedure;
  // Behind ours the handler writes through ctx.idempotency.db (its transaction); everyone else uses the root db.
  const dbOf = (ctx: unknown): Kysely<BenchDB> =>
    (ctx as { idempotency?: { db: Kysely<BenchDB> } }).idempotency?.db ?? db;
  return t.router({
    light: guarded
      .input(paymentInput)
      .mutation(({ ctx, input }) => lightHandler(dbOf(ctx), input, idempotencyKeyOf(ctx as BenchContext))),
    payment: guarded
      .input(paymentInput)
      .mutation(({ ctx, input }) => paymentHandler(dbOf(ctx), input, idempotencyKeyOf(ctx as BenchContext))),
    noop: t.procedure.mutation(() => ({ ok: true })),
  });
}

/**
 * The dialects scenario's handlers (its own tables, the SQL each dialect accepts) over HTTP: plain, or behind
 * ours in transaction mode on the same database. The body is ignored, as the in-process cells take no input.
 */
export async function buildDialectRouter(config: ServerConfig, dialect: DialectRemote, db: Kysely<any>) {
  const guard =
    config.spec.kind === 'ours'
      ? await (await import('../contenders/ours.ts')).oursMiddleware(config.spec, db, undefined)
      : undefined;
  const guarded = guard ? t.procedure.use(guard) : t.procedure;
  const dbOf = (ctx: unknown): Kysely<any> => (ctx as { idempotency?: { db: Kysely<any> } }).idempotency?.db ?? db;
  const ref = (ctx: unknown) => idempotencyKeyOf(ctx as BenchContext) ?? null;
  return t.router({
    light: guarded.mutation(({ ctx }) => dialectLight(dbOf(ctx), ref(ctx)).then(() => ({ ok: true }))),
    payment: guarded.mutation(({ ctx }) => dialectPayment(dbOf(ctx), dialect.flavour, ref(ctx))),
  });
}
