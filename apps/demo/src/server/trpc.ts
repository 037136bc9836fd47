import { initTRPC } from '@trpc/server';
import { idempotencyErrorFormatter } from '@trpc-idempotency/server';
import superjson from 'superjson';
import type { DemoContext } from './context';

const t = initTRPC.context<DemoContext>().create({
  transformer: superjson,
  // Puts `{ reason, retryAfterMs }` in `error.data.idempotency`, which the client link reads to decide on retries.
  errorFormatter: idempotencyErrorFormatter,
});

export const router = t.router;
export const publicProcedure = t.procedure;
