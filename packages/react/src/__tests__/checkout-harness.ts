import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createTRPCClient } from '@trpc/client';
import { createTRPCOptionsProxy } from '@trpc/tanstack-react-query';
import { idempotencyLink, pendingCallsLink } from '@trpc-idempotency/client';
import { type ComponentType, createElement, StrictMode, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { ledgerServer } from './ledger-server.js';
import type { AppRouter } from './router.js';

/**
 * What the README's "Paying" example takes from the app around it (`useTRPC`, `router`, `fmt`, …), over the
 * real link chain and a ledger server in the page. `?lose=n` loses the first n answers; `window.checkout`
 * lets the test change the input the way an edited form would, and lose answers again.
 */
const params = new URLSearchParams(window.location.search);
const network = { lose: Number(params.get('lose') ?? 0) };
const server = ledgerServer(() => (network.lose-- > 0 ? 'lose' : 'deliver'));
export const pendingCalls = pendingCallsLink<AppRouter>({ procedures: ['payments.create'] });
const client = createTRPCClient<AppRouter>({
  links: [
    pendingCalls,
    idempotencyLink<AppRouter>({ procedures: ['payments.create'], attempts: 2, baseDelayMs: 0, budget: false }),
    server.link,
  ],
});
const queryClient = new QueryClient();
const trpc = createTRPCOptionsProxy<AppRouter>({ client, queryClient });
const visited: string[] = [];

export const useTRPC = () => trpc;
export const useTRPCClient = () => client;
export const router = { push: (url: string) => void visited.push(url) };
export const fmt = (input: { amountCents: number }) => `$${(input.amountCents / 100).toFixed(2)}`;

type Input = { amountCents: number; description: string };

export function mount(Checkout: ComponentType<{ input: Input }>) {
  let setInput: (input: Input) => void = () => {};
  function App() {
    const [input, set] = useState<Input>({ amountCents: 4000, description: 'Train ticket' });
    setInput = set;
    return createElement(Checkout, { input });
  }
  Object.assign(window, { checkout: { server, network, visited, setInput: (input: Input) => setInput(input) } });
  createRoot(document.getElementById('root')!).render(
    createElement(StrictMode, null, createElement(QueryClientProvider, { client: queryClient }, createElement(App))),
  );
}
