import { initTRPC } from '@trpc/server';
import { z } from 'zod';

const t = initTRPC.create();

/** The shape of the app the hook is for: a keyed payment mutation and a query. */
export const appRouter = t.router({
  payments: t.router({
    create: t.procedure
      .input(z.object({ amountCents: z.number().int(), description: z.string() }))
      .mutation(({ input }) => ({ id: 1, amountCents: input.amountCents, createdAt: new Date() })),
    ledger: t.procedure.query(() => [] as { id: number }[]),
  }),
});
export type AppRouter = typeof appRouter;
