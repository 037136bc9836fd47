import { type inferRouterInputs, type inferRouterOutputs, initTRPC, TRPCError } from '@trpc/server';
import type { Generated, Kysely, Transaction } from 'kysely';
import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, type IdempotencyContext } from '../index.js';

interface DB {
  payments: { id: Generated<number>; user_id: string; amount: number };
}
interface Context {
  user: { id: string } | null;
  req: Request;
}
declare const db: Kysely<DB>;

const t = initTRPC.context<Context>().create();
const authed = t.procedure.use(({ ctx, next }) => {
  if (!ctx.user) throw new TRPCError({ code: 'UNAUTHORIZED' });
  return next({ ctx: { user: ctx.user } });
});

describe('createIdempotency types', () => {
  it('types ctx.idempotency from DB and keeps the procedure context, input and output', () => {
    const idempotency = createIdempotency({ db, scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user?.id}` });
    const router = t.router({
      pay: authed
        .use(idempotency.middleware)
        .input(z.object({ amount: z.number() }))
        .mutation(async ({ ctx, input }) => {
          expectTypeOf(ctx.idempotency.key).toEqualTypeOf<string>();
          expectTypeOf(ctx.idempotency.takeover).toEqualTypeOf<boolean>();
          expectTypeOf(ctx.idempotency.downstreamKey).toEqualTypeOf<(purpose?: string) => Promise<string>>();
          expectTypeOf(ctx.idempotency.db).toEqualTypeOf<Transaction<DB>>();
          expectTypeOf(ctx.idempotency).toEqualTypeOf<IdempotencyContext<DB>>();
          // The authed middleware's narrowing survives.
          expectTypeOf(ctx.user).toEqualTypeOf<{ id: string }>();
          expectTypeOf(ctx.req).toEqualTypeOf<Request>();
          expectTypeOf(input).toEqualTypeOf<{ amount: number }>();
          const row = await ctx.idempotency.db
            .insertInto('payments')
            .values({ user_id: ctx.user.id, amount: input.amount })
            .returning(['id'])
            .executeTakeFirstOrThrow();
          return { id: row.id, at: new Date() };
        }),
    });
    // No transformer on this router: the Date travels as its JSON string.
    expectTypeOf<inferRouterOutputs<typeof router>['pay']>().toEqualTypeOf<{ id: number; at: string }>();
    expectTypeOf<inferRouterInputs<typeof router>['pay']>().toEqualTypeOf<{ amount: number }>();
  });

  it('refuses a table that is not in DB', () => {
    const idempotency = createIdempotency({ db, scope: () => 'global' });
    t.procedure.use(idempotency.middleware).mutation(({ ctx }) => {
      // @ts-expect-error: 'nope' is not a table of DB
      ctx.idempotency.db.selectFrom('nope');
    });
  });

  it('infers the context from scope and refuses procedures whose context does not fit it', () => {
    const idempotency = createIdempotency({
      db,
      scope: ({ ctx }: { ctx: { tenantId: number } }) => `tenant:${ctx.tenantId}`,
    });
    // @ts-expect-error: Context has no tenantId
    t.procedure.use(idempotency.middleware);
    const tenantT = initTRPC.context<{ tenantId: number; extra: string }>().create();
    tenantT.procedure.use(idempotency.middleware).mutation(({ ctx }) => {
      expectTypeOf(ctx.extra).toEqualTypeOf<string>();
    });
  });

  it('types the key option with the same context', () => {
    createIdempotency({
      db,
      scope: ({ ctx }: { ctx: Context }) => ctx.req.url,
      key: ({ ctx, batchIndex }) => {
        expectTypeOf(ctx).toEqualTypeOf<Context>();
        expectTypeOf(batchIndex).toEqualTypeOf<number>();
        return ctx.req.headers.get('x-key') ?? undefined;
      },
    });
  });

  it('makes ctx.idempotency nullable with required: false', () => {
    const optional = createIdempotency({ db, scope: () => 'global', required: false });
    t.procedure.use(optional.middleware).mutation(({ ctx }) => {
      expectTypeOf(ctx.idempotency).toEqualTypeOf<IdempotencyContext<DB> | null>();
    });
    t.procedure
      .input(z.object({ orderId: z.string().optional() }))
      .use(optional.fromInput({ key: ({ input }) => input.orderId }))
      .mutation(({ ctx }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<IdempotencyContext<DB> | null>();
      });
  });

  it('returns migrate and purgeExpired with their result types', () => {
    const idempotency = createIdempotency({ db, scope: () => 'global', mode: 'lease' });
    expectTypeOf(idempotency.migrate()).toEqualTypeOf<Promise<void>>();
    expectTypeOf(idempotency.purgeExpired({ batchSize: 10 })).toEqualTypeOf<Promise<number>>();
  });

  it('types fromInput from the input of the procedure it is used on, after .input()', () => {
    const idempotency = createIdempotency({ db, scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user?.id}` });
    const place = authed
      .input(z.object({ orderId: z.string(), amount: z.number(), sentAt: z.date() }))
      .use(
        idempotency.fromInput({
          key: ({ input, ctx }) => {
            expectTypeOf(input).toEqualTypeOf<{ orderId: string; amount: number; sentAt: Date }>();
            expectTypeOf(ctx).toEqualTypeOf<Context>();
            return `order:${input.orderId}`;
          },
          fingerprint: ({ input }) => ({ amount: input.amount }),
        }),
      )
      .mutation(({ ctx, input }) => {
        expectTypeOf(ctx.idempotency).toEqualTypeOf<IdempotencyContext<DB>>();
        expectTypeOf(ctx.user).toEqualTypeOf<{ id: string }>();
        expectTypeOf(input.sentAt).toEqualTypeOf<Date>();
        return input.orderId;
      });
    const router = t.router({ place });
    expectTypeOf<inferRouterInputs<typeof router>['place']>().toEqualTypeOf<{
      orderId: string;
      amount: number;
      sentAt: Date;
    }>();

    t.procedure
      .input(z.object({ orderId: z.string() }))
      // @ts-expect-error: the input has no field `nope`
      .use(idempotency.fromInput({ key: ({ input }) => input.nope }));
    t.procedure
      .input(z.object({ orderId: z.number() }))
      // @ts-expect-error: a key is a string
      .use(idempotency.fromInput({ key: ({ input }) => input.orderId }));
    // Before `.input()` there is no typed input to read a key from.
    // @ts-expect-error: `input` is not typed yet
    t.procedure.use(idempotency.fromInput({ key: ({ input }) => input.orderId }));
  });

  it('types fromInput from an annotated input when it is made apart from the procedure', () => {
    const idempotency = createIdempotency({ db, scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user?.id}` });
    const byOrder = idempotency.fromInput({ key: ({ input }: { input: { orderId: string } }) => input.orderId });
    t.procedure
      .input(z.object({ orderId: z.string(), amount: z.number() }))
      .use(byOrder)
      .mutation(({ ctx }) => expectTypeOf(ctx.idempotency.key).toEqualTypeOf<string>());
    // @ts-expect-error: this procedure's input has no orderId
    t.procedure.input(z.object({ amount: z.number() })).use(byOrder);
  });
});
