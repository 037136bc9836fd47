import { experimental_trpcMiddleware, type TRPCMiddlewareBuilder } from '@trpc/server';
import type { Kysely } from 'kysely';
import { ReplayCache } from './cache/replay-cache.js';
import { createEmitter } from './events.js';
import type { IdempotencyContext, Runtime } from './middleware/call.js';
import { type CallSource, headerSource } from './middleware/call-source.js';
import { createMiddlewareFunction } from './middleware/idempotency-middleware.js';
import { InFlightCalls } from './middleware/in-flight-calls.js';
import { checkFromInput, type FromInputOptions, inputSource } from './middleware/input-source.js';
import { createLeaseRenewer, runLeaseMode } from './modes/lease-mode.js';
import { runTransactionMode } from './modes/transaction-mode.js';
import { type IdempotencyOptions, resolveOptions } from './options.js';
import { createStoreDialect } from './store/dialects/create-store-dialect.js';
import { Telemetry } from './telemetry/telemetry.js';
import { traceCalls } from './telemetry/trace-calls.js';

/** `ctx.idempotency` as the resolver sees it: `null` only with `required: false` and no key sent. */
export type IdempotencyContextFor<DB, TRequired extends boolean> = TRequired extends false
  ? IdempotencyContext<DB> | null
  : IdempotencyContext<DB>;

/** Options of `purgeExpired()`. */
export interface PurgeExpiredOptions {
  /** Rows deleted per statement, so one purge never holds many locks or a long transaction. Default 1000. */
  batchSize?: number;
  /** Stops after this many batches (bounds one cron run). Default: until no expired row is left. */
  maxBatches?: number;
}

/** What {@link createIdempotency} returns. */
export interface Idempotency<TContext, DB, TRequired extends boolean = true> {
  /**
   * The tRPC middleware: `authedProcedure.use(idempotency.middleware)`. It fits procedures whose context has the
   * shape `scope` was typed with, and adds `ctx.idempotency`.
   */
  middleware: TRPCMiddlewareBuilder<TContext, object, { idempotency: IdempotencyContextFor<DB, TRequired> }, unknown>;
  /**
   * The middleware for one procedure whose key or fingerprint comes from its parsed input; place it after
   * `.input()`, where `input` is typed from the procedure:
   *
   * ```ts
   * .input(z.object({ orderId: z.string(), amount: z.number(), sentAt: z.string() }))
   * .use(idempotency.fromInput({
   *   key: ({ input }) => `order:${input.orderId}`,
   *   fingerprint: ({ input }) => ({ amount: input.amount }),
   * }))
   * ```
   *
   * It shares the table, the scope and the in-process state of `middleware`.
   */
  fromInput<TInput>(
    opts: FromInputOptions<TContext, TInput>,
  ): TRPCMiddlewareBuilder<TContext, object, { idempotency: IdempotencyContextFor<DB, TRequired> }, TInput>;
  /** Creates the table and its expiry index if missing. Idempotent, and safe when several instances start at once. */
  migrate(): Promise<void>;
  /** Deletes expired rows in bounded batches (never a live lease) and returns how many; safe to run from cron. */
  purgeExpired(opts?: PurgeExpiredOptions): Promise<number>;
}

/**
 * Makes tRPC mutations idempotent: a retried call with the same `Idempotency-Key` replays the stored outcome
 * instead of running again. Keep it one call so `scope`'s annotated `ctx` types the middleware:
 *
 * ```ts
 * const idempotency = createIdempotency({ db, scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user.id}` });
 * ```
 */
export function createIdempotency<TContext extends object, DB, TRequired extends boolean = true>(
  options: IdempotencyOptions<TContext, DB, TRequired>,
): Idempotency<TContext, DB, TRequired> {
  const resolved = resolveOptions(options);
  const db = options.db as Kysely<any>;
  const dialect = createStoreDialect(db, resolved);
  const rt: Runtime = {
    options: resolved,
    db,
    store: dialect.store,
    sql: dialect.sql,
    stepSql: dialect.stepSql,
    errors: dialect.errors,
    scopeStorage: dialect,
    cache: resolved.cache === false ? undefined : new ReplayCache(resolved.cache),
    emit: createEmitter(resolved.onEvent),
    leases: resolved.mode === 'lease' ? createLeaseRenewer(dialect.store, dialect.sql, resolved.lease) : undefined,
  };
  // One gate for every middleware of this instance: a key from the input and one from a header can be the same.
  const gate = new InFlightCalls(resolved.mode === 'transaction');
  const runMode = resolved.mode === 'lease' ? runLeaseMode : runTransactionMode;
  // Without `telemetry` the middleware is not wrapped: a call pays nothing for it.
  const telemetry = resolved.telemetry ? new Telemetry(resolved.telemetry, resolved.mode, dialect.name) : undefined;
  const build = (source: CallSource) => {
    const untraced = createMiddlewareFunction(rt, gate, runMode, source);
    const fn = telemetry ? traceCalls(telemetry, untraced) : untraced;
    return experimental_trpcMiddleware<{ ctx: TContext }>().create(fn as never) as unknown as Idempotency<
      TContext,
      DB,
      TRequired
    >['middleware'];
  };

  return {
    middleware: build(headerSource(rt)),
    fromInput: <TInput>(opts: FromInputOptions<TContext, TInput>) =>
      build(inputSource(rt, checkFromInput(opts as FromInputOptions<unknown, unknown>))) as never,
    migrate: () => dialect.migrate(),
    async purgeExpired(opts = {}) {
      const batchSize = opts.batchSize ?? 1000;
      const maxBatches = opts.maxBatches ?? Number.POSITIVE_INFINITY;
      if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
        throw new RangeError(`purgeExpired: \`batchSize\` must be an integer ≥ 1, got ${batchSize}`);
      }
      let total = 0;
      for (let batch = 0; batch < maxBatches; batch++) {
        const deleted = await dialect.purgeBatch(batchSize);
        total += deleted;
        if (deleted < batchSize) break;
      }
      return total;
    },
  };
}
