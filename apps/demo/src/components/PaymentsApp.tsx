'use client';

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { indexedDBStore, localStorageStore, type PendingCallStore } from '@trpc-idempotency/client';
import { useEffect, useRef, useState } from 'react';
import { createDemoClient, createDemoPendingCalls } from '@/client/createDemoClient';
import { TRPCProvider } from '@/client/trpc';
import { type FaultMode, faultModes } from '@/network/faultModes';
import { flakyFetch, type NetworkAttempt } from '@/network/flakyFetch';
import { PaymentsPage } from './PaymentsPage';

/** `?store=indexeddb` or `?store=none` (nothing kept across reloads); localStorage otherwise. */
function chooseStore(): { store: PendingCallStore | undefined; name: string } {
  const choice = typeof window === 'undefined' ? null : new URLSearchParams(window.location.search).get('store');
  if (choice === 'none') return { store: undefined, name: 'nowhere (?store=none)' };
  if (choice === 'indexeddb')
    return { store: indexedDBStore({ databaseName: 'trpc-idempotency-demo' }), name: 'IndexedDB' };
  return { store: localStorageStore({ prefix: 'trpc-idempotency-demo' }), name: 'localStorage' };
}

/** The create-t3-app wiring: a QueryClient and a tRPC client behind `TRPCProvider`, made once per page. */
export function PaymentsApp() {
  const [mode, setMode] = useState<FaultMode>('off');
  const modeRef = useRef(mode);
  modeRef.current = mode;
  const [network, setNetwork] = useState<ReadonlyMap<string, NetworkAttempt[]>>(new Map());
  const [reloading, setReloading] = useState(false);
  const reloadOnLost = useRef(false);

  // `?network=<mode>` starts on a faulty network. Set in an effect (the page is prerendered with 'off'); the
  // ref too, so the resume that the page's own effect has just begun already goes through it.
  useEffect(() => {
    const initial = new URLSearchParams(window.location.search).get('network');
    const found = faultModes.find((entry) => entry.mode === initial);
    if (found) {
      modeRef.current = found.mode;
      setMode(found.mode);
    }
  }, []);

  const [env] = useState(() => {
    const { store, name } = chooseStore();
    const pendingCalls = createDemoPendingCalls(store);
    const trpcClient = createDemoClient({
      url: '/api/trpc',
      pendingCalls,
      fetch: flakyFetch({
        mode: () => modeRef.current,
        onAttempt: (attempt) => {
          setNetwork((previous) => {
            const next = new Map(previous);
            // A batch may carry the same key twice (a double submit): one request, one entry.
            for (const key of new Set(attempt.keys)) next.set(key, [...(next.get(key) ?? []), attempt]);
            return next;
          });
          // "Reload while the answer is lost": the server has committed, the answer is gone, the page goes.
          if (reloadOnLost.current && attempt.outcome === 'lost') {
            reloadOnLost.current = false;
            setReloading(true);
            setTimeout(() => window.location.reload(), 1_500);
          }
        },
      }),
    });
    const queryClient = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    return { trpcClient, queryClient, pendingCalls, storeName: name };
  });

  return (
    <QueryClientProvider client={env.queryClient}>
      <TRPCProvider trpcClient={env.trpcClient} queryClient={env.queryClient}>
        <PaymentsPage
          mode={mode}
          onModeChange={setMode}
          network={network}
          pendingCalls={env.pendingCalls}
          storeName={env.storeName}
          reloading={reloading}
          onReloadWhileLost={() => {
            reloadOnLost.current = true;
            setMode('lose-every-response');
          }}
        />
      </TRPCProvider>
    </QueryClientProvider>
  );
}
