import { createTRPCClient, httpBatchLink, httpBatchStreamLink, splitLink, type TRPCLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import {
  type AsyncStorageLike,
  asyncStorageStore,
  type IdempotencyCallInfo,
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
  pendingCallsLink,
} from '@trpc-idempotency/client';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { type Backend, openBackend } from '../harness/backends.ts';
import { idempotencyOn, listen, type ReplayContext } from './replay-app.ts';

/** An in-memory AsyncStorage: the pending calls' store, as React Native's would be. */
function memoryStorage(): AsyncStorageLike {
  const items = new Map<string, string>();
  return {
    getItem: async (key) => items.get(key) ?? null,
    setItem: async (key, value) => void items.set(key, value),
    removeItem: async (key) => void items.delete(key),
    getAllKeys: async () => [...items.keys()],
  };
}

/**
 * A streamed response (httpBatchStreamLink) sends its headers before any call resolves, and tRPC's stream carries
 * nothing per call but its data: there the replay flag cannot reach the client. The React README therefore sends
 * mutations through httpBatchLink (splitLink; queries stay streamed), where a resumed call and `earlier.replayed`
 * know that the server replayed.
 */
describe("the React README's wiring reports a replay as replayed", () => {
  let backend: Backend;
  let server: Awaited<ReturnType<typeof listen>>;
  let runs = 0;
  const buildRouter = async () => {
    const idempotency = await idempotencyOn(backend.db, { serializer: superjson });
    const t = initTRPC.context<ReplayContext>().create({ transformer: superjson });
    return t.router({
      payments: t.router({
        create: t.procedure
          .use(idempotency.middleware)
          .input(z.object({ amountCents: z.number() }))
          .mutation(({ input }) => ({ paymentId: ++runs, amountCents: input.amountCents })),
        list: t.procedure.query(() => ['p1', 'p2']),
      }),
    });
  };
  type AppRouter = Awaited<ReturnType<typeof buildRouter>>;

  beforeAll(async () => {
    backend = await openBackend('pg-pool', inject('pgAdminUrl'));
    server = await listen(await buildRouter());
  });
  afterAll(async () => {
    await server?.close();
    await backend?.drop();
  });

  /** The README's links; `loseFirstAnswer` drops the first answer after the server committed it. */
  function clientFor(wiring: 'readme' | 'stream-only', loseFirstAnswer = false) {
    let lost = !loseFirstAnswer;
    const fetchImpl: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (lost) return res;
      lost = true;
      await res.text();
      throw new TypeError('fetch failed (answer lost)');
    };
    const http = {
      transformer: superjson,
      url: server.url,
      headers: idempotencyHeaders,
      fetch: idempotencyFetch(fetchImpl),
    };
    const pendingCalls = pendingCallsLink<AppRouter>({
      procedures: ['payments.create'],
      store: asyncStorageStore(memoryStorage()),
      user: () => 'u1',
      transformer: superjson,
    });
    const terminating: TRPCLink<AppRouter> =
      wiring === 'readme'
        ? splitLink({
            condition: (op) => op.type === 'mutation',
            true: httpBatchLink(http),
            false: httpBatchStreamLink(http),
          })
        : httpBatchStreamLink(http);
    const client = createTRPCClient<AppRouter>({
      links: [pendingCalls, idempotencyLink<AppRouter>({ procedures: ['payments.create'], attempts: 1 }), terminating],
    });
    return { client, pendingCalls };
  }

  for (const [wiring, replayed] of [
    ['readme', true],
    ['stream-only', false],
  ] as const) {
    it(`${wiring}: a resumed call whose first answer was lost reports replayed: ${replayed}`, async () => {
      const { client, pendingCalls } = clientFor(wiring, true);
      await expect(client.payments.create.mutate({ amountCents: 500 })).rejects.toThrow(/answer lost/);
      const before = runs;
      const [resumed] = await pendingCalls.resume(client);
      expect(resumed).toMatchObject({ status: 'succeeded', replayed, data: { amountCents: 500 } });
      expect(runs).toBe(before);
    });

    it(`${wiring}: a second send under the same key reports replayed: ${replayed}; queries still answer`, async () => {
      const { client } = clientFor(wiring);
      const idempotencyKey = `again-${wiring}`;
      const first: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
      const again: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
      const a = await client.payments.create.mutate(
        { amountCents: 700 },
        { context: { idempotencyKey, idempotencyInfo: first } },
      );
      const b = await client.payments.create.mutate(
        { amountCents: 700 },
        { context: { idempotencyKey, idempotencyInfo: again } },
      );
      expect(b).toEqual(a);
      expect([first.replayed, again.replayed]).toEqual([false, replayed]);
      expect(await client.payments.list.query()).toEqual(['p1', 'p2']);
    });
  }
});
