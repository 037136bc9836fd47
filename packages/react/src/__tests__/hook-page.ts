import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient } from '@trpc/client';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import {
  idempotencyLink,
  indexedDBStore,
  isOutcomeUnknown,
  localStorageStore,
  pendingCallsLink,
} from '@trpc-idempotency/client';
import { createElement, StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { useIdempotentMutation } from '../index.js';
import { ledgerServer } from './ledger-server.js';
import type { AppRouter } from './router.js';

/**
 * The page the hook's browser test drives: the hook in React 19 StrictMode, over the real link chain and
 * a ledger server in the page. `?lose=n` loses the first n answers, `?refuse=n` then refuses the next n
 * (a 401: the session ended), `?store=localStorage|indexedDB` keeps pending calls there, `?retry` sets the
 * mutation's `retry`, `?defaultRetry` the QueryClient's. `?user=alice` pins calls to `session.user` (the links'
 * `user` and `identity`); `?signInDuring=bob` signs bob in as the first answer is lost. `sentAs` lists who was
 * signed in as each attempt was sent.
 */
const params = new URLSearchParams(window.location.search);
const network = { lose: Number(params.get('lose') ?? 0), refuse: Number(params.get('refuse') ?? 0) };
const session = { user: params.get('user') ?? 'default' };
const signInDuring = params.get('signInDuring');
const sentAs: string[] = [];
const server = ledgerServer(() => {
  sentAs.push(session.user);
  if (network.lose-- > 0) {
    if (signInDuring) session.user = signInDuring;
    return 'lose';
  }
  return network.refuse-- > 0 ? 'refuse' : 'deliver';
});
const store = params.get('store');
const pending = pendingCallsLink<AppRouter>({
  procedures: ['payments.create'],
  user: () => session.user,
  ...(store === 'localStorage' && { store: localStorageStore() }),
  ...(store === 'indexedDB' && { store: indexedDBStore() }),
});
const client = createTRPCClient<AppRouter>({
  links: [
    pending,
    idempotencyLink<AppRouter>({
      procedures: ['payments.create'],
      attempts: 2,
      baseDelayMs: 0,
      budget: false,
      identity: () => session.user,
    }),
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
  Object.assign(window, { hook: { mutate: pay.mutate, server, network, pending, client, session, sentAs } });
  const state = {
    status: pay.status,
    key: pay.idempotency.key ?? null,
    earlier: pay.idempotency.earlier ?? null,
    // What the README tells the user: "we could not confirm the payment".
    unknown: pay.isError && isOutcomeUnknown(pay.error),
  };
  return createElement('pre', { id: 'state' }, JSON.stringify(state));
}

createRoot(document.getElementById('root')!).render(
  createElement(StrictMode, null, createElement(QueryClientProvider, { client: queryClient }, createElement(App))),
);
