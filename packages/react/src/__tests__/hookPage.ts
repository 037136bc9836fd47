import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient } from '@trpc/client';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { idempotencyLink, pendingCallsLink } from '@trpc-idempotency/client';
import { createElement, StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { useIdempotentMutation } from '../index.js';
import { ledgerServer } from './ledgerServer.js';
import type { AppRouter } from './router.js';

/**
 * The page the hook's browser test drives: the hook in React 19 StrictMode, over the real link chain and
 * a ledger server in the page. `?lose=n` loses the first n answers, `?retry` sets the mutation's
 * `retry`, `?defaultRetry` the QueryClient's.
 */
const params = new URLSearchParams(window.location.search);
const network = { lose: Number(params.get('lose') ?? 0) };
const server = ledgerServer(() => (network.lose-- > 0 ? 'lose' : 'deliver'));
const client = createTRPCClient<AppRouter>({
  links: [
    pendingCallsLink<AppRouter>({ procedures: ['payments.create'] }),
    idempotencyLink<AppRouter>({ procedures: ['payments.create'], attempts: 2, baseDelayMs: 0, budget: false }),
    server.link,
  ],
});
const queryClient = new QueryClient(
  params.has('defaultRetry') ? { defaultOptions: { mutations: { retry: 3, retryDelay: 0 } } } : {},
);
const trpc = createTRPCOptionsProxy<AppRouter>({ client, queryClient });

function App() {
  const pay = useIdempotentMutation(
    trpc.payments.create.mutationOptions(params.has('retry') ? { retry: 2, retryDelay: 0 } : {}),
  );
  Object.assign(window, { hook: { mutate: pay.mutate, server, network } });
  const state = { status: pay.status, key: pay.idempotency.key ?? null, earlier: pay.idempotency.earlier ?? null };
  return createElement('pre', { id: 'state' }, JSON.stringify(state));
}

createRoot(document.getElementById('root')!).render(
  createElement(StrictMode, null, createElement(QueryClientProvider, { client: queryClient }, createElement(App))),
);
