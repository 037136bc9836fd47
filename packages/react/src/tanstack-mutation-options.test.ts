import { MutationObserver, QueryClient } from '@tanstack/react-query';
import { createTRPCClient } from '@trpc/client';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { idempotencyLink, pendingCallsLink } from '@trpc-idempotency/client';
import { expect, test } from 'vitest';
import { ledgerServer } from './__tests__/ledger-server.js';
import type { AppRouter } from './__tests__/router.js';
import { ActionController } from './internals/action-controller.js';

/**
 * The hook relies on `mutationOptions()`'s `mutationFn` reaching the first link synchronously. This runs
 * it the way `useMutation` does (a MutationObserver), through the real @trpc/tanstack-react-query.
 */
test("the action's key reaches the link via @trpc/tanstack-react-query's mutationOptions, every attempt", async () => {
  let lose = 2;
  const server = ledgerServer(() => (lose-- > 0 ? 'lose' : 'deliver'));
  const client = createTRPCClient<AppRouter>({
    links: [
      pendingCallsLink<AppRouter>({ procedures: ['payments.create'] }),
      idempotencyLink<AppRouter>({ procedures: ['payments.create'], attempts: 2, baseDelayMs: 0, budget: false }),
      server.link,
    ],
  });
  const queryClient = new QueryClient();
  const trpc = createTRPCOptionsProxy<AppRouter>({ client, queryClient });
  const options = trpc.payments.create.mutationOptions();
  const controller = new ActionController<any, { amountCents: number; description: string }>(() => ({
    generateKey: () => 'action-key',
  }));
  const observer = new MutationObserver(queryClient, {
    ...options,
    retry: 0,
    mutationFn: (variables, context) => controller.run(variables, context, options.mutationFn!),
  });
  const input = { amountCents: 4000, description: 'Train ticket' };
  await expect(observer.mutate(input)).rejects.toThrow(/answer lost/);
  await expect(observer.mutate(input)).resolves.toEqual({ id: 1 }); // "try again"
  expect(server.attempts.map((op) => [op.path, op.context.idempotencyKey])).toEqual([
    ['payments.create', 'action-key'],
    ['payments.create', 'action-key'],
    ['payments.create', 'action-key'],
  ]);
  expect(server.ledger).toHaveLength(1);
});
