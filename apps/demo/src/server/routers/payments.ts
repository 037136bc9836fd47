import { TRPCError } from '@trpc/server';
import { sql } from 'kysely';
import { z } from 'zod';
import { database, idempotency } from '../backend';
import { publicProcedure, router } from '../trpc';

/** Above this the demo's "card network" declines: a deterministic error the middleware stores and replays. */
export const DECLINE_ABOVE_CENTS = 500_000;

const idempotentProcedure = publicProcedure.use(idempotency.middleware);

const createPaymentInput = z.object({
  amountCents: z.number().int().positive().max(100_000_000),
  description: z.string().trim().min(1).max(140),
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export const paymentsRouter = router({
  create: idempotentProcedure.input(createPaymentInput).mutation(async ({ ctx, input }) => {
    // A slow payment provider, only when the caller asks for it (the flaky network's in-flight-duplicate mode):
    // it keeps the original running while its duplicate arrives.
    if (ctx.processingMs > 0) await sleep(ctx.processingMs);
    if (input.amountCents > DECLINE_ABOVE_CENTS) {
      throw new TRPCError({
        code: 'PAYMENT_REQUIRED',
        message: 'Card declined: the demo limit is 5,000.00 per payment.',
      });
    }
    // `ctx.idempotency.db` is the transaction the stored result commits with: the charge and the key are one unit.
    const payment = await ctx.idempotency.db
      .insertInto('payments')
      .values({
        user_id: ctx.userId,
        amount_cents: input.amountCents,
        description: input.description,
        idempotency_key: ctx.idempotency.key,
      })
      .returning(['id', 'amount_cents', 'description', 'idempotency_key', 'created_at'])
      .executeTakeFirstOrThrow();
    return {
      id: payment.id,
      amountCents: payment.amount_cents,
      description: payment.description,
      key: payment.idempotency_key,
      createdAt: payment.created_at,
    };
  }),

  /** The caller's ledger: the newest rows plus totals computed over every row, duplicates included. */
  ledger: publicProcedure
    .input(z.object({ limit: z.number().int().min(1).max(1_000).default(50) }).default({ limit: 50 }))
    .query(async ({ ctx, input }) => {
      const { db } = database;
      const [rows, totals] = await Promise.all([
        db
          .selectFrom('payments')
          .select(['id', 'amount_cents', 'description', 'idempotency_key', 'created_at'])
          .where('user_id', '=', ctx.userId)
          .orderBy('id', 'desc')
          .limit(input.limit)
          .execute(),
        db
          .selectFrom('payments')
          .select([
            sql<number>`count(*)::int`.as('rows'),
            sql<number>`count(distinct idempotency_key)::int`.as('keys'),
            sql<number>`coalesce(sum(amount_cents), 0)::bigint`.as('total_cents'),
          ])
          .where('user_id', '=', ctx.userId)
          .executeTakeFirstOrThrow(),
      ]);
      return {
        payments: rows.map((row) => ({
          id: row.id,
          amountCents: row.amount_cents,
          description: row.description,
          key: row.idempotency_key,
          createdAt: row.created_at,
        })),
        rows: totals.rows,
        distinctKeys: totals.keys,
        /** Rows that share a key with an earlier row: money charged twice. Must stay 0. */
        duplicates: totals.rows - totals.keys,
        totalCents: Number(totals.total_cents),
        database: database.kind === 'pglite' ? `PGlite (${database.location})` : `Postgres (${database.location})`,
      };
    }),
});
