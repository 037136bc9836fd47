import { createTRPCContext } from '@trpc/tanstack-react-query';
import type { AppRouter } from '../server/router';

/** The create-t3-app shape: `useTRPC()` gives `trpc.payments.create.mutationOptions()` and friends. */
export const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();
