import { paymentsRouter } from './routers/payments';
import { router } from './trpc';

export const appRouter = router({
  payments: paymentsRouter,
});

export type AppRouter = typeof appRouter;
