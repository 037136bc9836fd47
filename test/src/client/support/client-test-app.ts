import type { IncomingMessage, ServerResponse } from 'node:http';
import { initTRPC, TRPCError } from '@trpc/server';
import { createIdempotency, idempotencyErrorFormatter } from '@trpc-idempotency/server';
import { type Kysely, sql } from 'kysely';
import { z } from 'zod';

export interface AppContext {
  req: IncomingMessage;
  res: ServerResponse;
  user: string | undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The router the client tests call: guarded mutations that write a row through `ctx.idempotency.db`
 * (so a double execution would show in the table and in `executions`), plus the refusals the retry
 * policy must tell apart.
 */
export function createClientTestApp(db: Kysely<any>, opts: { wait?: number } = {}) {
  const executions = new Map<string, number>();
  const count = (path: string) => executions.set(path, (executions.get(path) ?? 0) + 1);

  const t = initTRPC.context<AppContext>().create({ errorFormatter: idempotencyErrorFormatter });
  const idempotency = createIdempotency({
    db,
    scope: ({ ctx }: { ctx: AppContext }) => `user:${ctx.user ?? 'anonymous'}`,
    ...(opts.wait !== undefined && { wait: opts.wait }),
  });
  const authed = t.procedure.use(({ ctx, next }) => {
    if (!ctx.user) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'sign in first' });
    // An app's CSRF check: it refuses before the idempotency middleware sees the key.
    if (ctx.req.headers['x-csrf'] === 'expired')
      throw new TRPCError({ code: 'FORBIDDEN', message: 'CSRF token expired' });
    return next({ ctx: { ...ctx, user: ctx.user } });
  });
  const guarded = authed.use(idempotency.middleware);

  const router = t.router({
    payments: t.router({
      create: guarded
        .input(z.object({ amount: z.number().int().positive(), delayMs: z.number().optional() }))
        .mutation(async ({ input, ctx }) => {
          count('payments.create');
          if (input.delayMs) await sleep(input.delayMs);
          const row = await ctx.idempotency.db
            .insertInto('client_payments')
            .values({ idem_key: ctx.idempotency.key, amount: input.amount })
            .returning('id')
            .executeTakeFirstOrThrow();
          return { id: Number(row.id), amount: input.amount, key: ctx.idempotency.key };
        }),
      refund: guarded.input(z.object({ id: z.number() })).mutation(({ input }) => {
        count('payments.refund');
        throw new TRPCError({ code: 'CONFLICT', message: `payment ${input.id} is already refunded` });
      }),
      list: t.procedure.query(() => {
        count('payments.list');
        return [];
      }),
    }),
    orders: t.router({
      note: authed.input(z.object({ text: z.string() })).mutation(({ input }) => {
        count('orders.note');
        return input.text;
      }),
    }),
  });

  return {
    router,
    idempotency,
    executions,
    createContext: ({ req, res }: { req: IncomingMessage; res: ServerResponse }): AppContext => {
      const user = req.headers['x-user'];
      return { req, res, user: typeof user === 'string' ? user : undefined };
    },
    async setup() {
      await idempotency.migrate();
      await sql`create table if not exists client_payments (
        id bigserial primary key,
        idem_key text not null,
        amount integer not null
      )`.execute(db);
    },
    async rowsPerKey(): Promise<Map<string, number>> {
      const rows = await sql<{ idem_key: string; n: string }>`
        select idem_key, count(*) as n from client_payments group by idem_key`.execute(db);
      return new Map(rows.rows.map((r) => [r.idem_key, Number(r.n)]));
    },
  };
}

export type ClientTestRouter = ReturnType<typeof createClientTestApp>['router'];
