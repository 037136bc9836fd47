import { initTRPC } from '@trpc/server';
import type { BenchContext } from './headers.ts';

/** One tRPC instance for every contender: same procedures, same (default) error formatter. */
export const t = initTRPC.context<BenchContext>().create();

/** The middleware type the contender factories return. */
export type BenchMiddleware = Parameters<typeof t.procedure.use>[0];
