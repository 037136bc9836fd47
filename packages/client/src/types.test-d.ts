import { createTRPCClient, httpBatchLink, httpBatchStreamLink, httpLink, TRPCClientError } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { describe, expectTypeOf, test } from 'vitest';
import { z } from 'zod';
import {
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
  isIdempotencyError,
  type MutationPath,
} from './index.js';

const t = initTRPC.create();
const appRouter = t.router({
  payments: t.router({
    create: t.procedure.input(z.object({ amount: z.number() })).mutation(() => 'p1'),
    list: t.procedure.query(() => []),
    refunds: t.router({ issue: t.procedure.mutation(() => 'r1') }),
  }),
  orders: { place: t.procedure.mutation(() => 'o1') },
  health: t.procedure.query(() => 'ok'),
});
type AppRouter = typeof appRouter;

describe('procedures', () => {
  test('lists every mutation path, nested routers included, and nothing else', () => {
    expectTypeOf<MutationPath<AppRouter>>().toEqualTypeOf<
      'payments.create' | 'payments.refunds.issue' | 'orders.place'
    >();
  });

  test('a typo or a query path does not compile', () => {
    idempotencyLink<AppRouter>({ procedures: ['payments.create', 'orders.place'] });
    idempotencyLink<AppRouter>({ procedures: 'all' });
    // @ts-expect-error misspelt path
    idempotencyLink<AppRouter>({ procedures: ['payments.craete'] });
    // @ts-expect-error a query is never keyed
    idempotencyLink<AppRouter>({ procedures: ['payments.list'] });
    // @ts-expect-error a router is not a procedure
    idempotencyLink<AppRouter>({ procedures: ['payments'] });
  });

  test('inputKeyed takes mutation paths, as procedures does', () => {
    idempotencyLink<AppRouter>({ procedures: ['payments.create'], inputKeyed: ['orders.place'] });
    // @ts-expect-error a query is never keyed
    idempotencyLink<AppRouter>({ procedures: [], inputKeyed: ['payments.list'] });
    // @ts-expect-error misspelt path
    idempotencyLink<AppRouter>({ procedures: [], inputKeyed: ['orders.plaec'] });
  });
});

describe('headers and fetch', () => {
  test('idempotencyHeaders and idempotencyFetch drop into every HTTP link', () => {
    const url = 'http://localhost/trpc';
    createTRPCClient<AppRouter>({
      links: [
        idempotencyLink<AppRouter>({ procedures: ['payments.create'] }),
        httpBatchLink({ url, headers: idempotencyHeaders, fetch: idempotencyFetch() }),
      ],
    });
    httpLink({ url, headers: idempotencyHeaders, fetch: idempotencyFetch(fetch) });
    httpBatchStreamLink({ url, headers: idempotencyHeaders });
  });

  test('with() infers the link options from the link it is given to', () => {
    httpBatchLink({
      url: '',
      headers: idempotencyHeaders.with(({ opList }) => {
        expectTypeOf(opList.length).toBeNumber();
        return { authorization: 'Bearer x' };
      }),
    });
    httpLink({
      url: '',
      headers: idempotencyHeaders.with(async ({ op }) => {
        expectTypeOf(op.path).toBeString();
        return { authorization: 'Bearer x' };
      }),
    });
    httpLink({ url: '', headers: idempotencyHeaders.with({ authorization: 'Bearer x' }) });
  });
});

describe('per-call context', () => {
  test('idempotencyKey and idempotencyInfo are typed on a call', async () => {
    const client = createTRPCClient<AppRouter>({ links: [httpLink({ url: '' })] });
    const info = { attempts: 0, replayed: false, settled: false };
    await client.payments.create.mutate({ amount: 1 }, { context: { idempotencyKey: 'k', idempotencyInfo: info } });
  });

  test('isIdempotencyError narrows to the reason data', () => {
    const err: unknown = new TRPCClientError('x');
    if (isIdempotencyError(err)) {
      expectTypeOf(err.data.idempotency.reason).toEqualTypeOf<
        'key_missing' | 'key_invalid' | 'payload_mismatch' | 'in_progress' | 'store_unavailable' | 'response_too_large'
      >();
    }
  });
});
