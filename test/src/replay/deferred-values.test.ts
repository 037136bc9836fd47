import { createTRPCClient, httpBatchStreamLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { idempotencyFetch, idempotencyHeaders, idempotencyLink } from '@trpc-idempotency/client';
import { describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { type BackendName, keyRows, openBackend } from '../harness/backends.ts';
import { idempotencyOn, ledgerRows, listen, type ReplayContext, writeLedger } from './replay-app.ts';

/**
 * A result that holds a Promise or an async iterable is streamed by `httpBatchStreamLink` as it settles, but a
 * stored result is the value at commit time: JSON writes a Promise as `{}`, so the replay answered `receipt: {}`
 * where the first answer streamed `"receipt-1"`. Such a result is refused instead: the call fails with an error
 * naming where the deferred value is, its writes roll back and the key stays free.
 */
describe.each(['pg-pool', 'mariadb', 'sqlite'] satisfies BackendName[])(
  'a result holding a deferred value, on %s',
  (name) => {
    for (const mode of ['transaction', 'lease'] as const) {
      it(`${mode} mode: refused with a clear error through httpBatchStreamLink, writes rolled back, key free`, async () => {
        const backend = await openBackend(name, inject('pgAdminUrl'));
        const idempotency = await idempotencyOn(backend.db, { mode });
        const t = initTRPC.context<ReplayContext>().create();
        let settle = true;
        let runs = 0;
        const router = t.router({
          pay: t.procedure
            .use(idempotency.middleware)
            .input(z.object({ amount: z.number(), deferred: z.enum(['promise', 'iterable']) }))
            .mutation(async ({ ctx, input }) => {
              runs++;
              await writeLedger(ctx.idempotency.db, ctx.idempotency.key, input.amount);
              if (settle) return { payment: runs, receipt: 'receipt-1', events: [1, 2] };
              return input.deferred === 'promise'
                ? { payment: runs, receipt: Promise.resolve('receipt-1') }
                : {
                    payment: runs,
                    events: (async function* () {
                      yield 1;
                      yield 2;
                    })(),
                  };
            }),
        });
        const server = await listen(router);
        const client = createTRPCClient<typeof router>({
          links: [
            idempotencyLink<typeof router>({ procedures: ['pay'], attempts: 1 }),
            httpBatchStreamLink({ url: server.url, headers: idempotencyHeaders, fetch: idempotencyFetch() }),
          ],
        });
        try {
          for (const deferred of ['promise', 'iterable'] as const) {
            const key = `${mode}-${deferred}`;
            const call = () => client.pay.mutate({ amount: 5, deferred }, { context: { idempotencyKey: key } });
            settle = false;
            const where = deferred === 'promise' ? 'receipt' : 'events';
            for (let attempt = 0; attempt < 2; attempt++) {
              await expect(call()).rejects.toMatchObject({
                data: { code: 'INTERNAL_SERVER_ERROR' },
                message: expect.stringMatching(
                  new RegExp(`${deferred === 'promise' ? 'a Promise' : 'an async iterable'} at result\\.${where}`),
                ),
              });
            }
            expect(await ledgerRows(backend.db, key)).toBe(0);
            expect(await keyRows(backend.db, { key })).toEqual([]);
            // The key is free: the same call, now returning settled values, runs and is then replayed.
            settle = true;
            const before = runs;
            const first = await call();
            expect(await call()).toEqual(first);
            expect(runs).toBe(before + 1);
            expect(await ledgerRows(backend.db, key)).toBe(1);
          }
        } finally {
          await server.close();
          await backend.drop();
        }
      });
    }
  },
);
