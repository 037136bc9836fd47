import { createTRPCClient, httpLink, type TRPCClientError } from '@trpc/client';
import { type inferRouterError, initTRPC } from '@trpc/server';
import { describe, expectTypeOf, it } from 'vitest';
import { type IdempotencyErrorData, idempotencyErrorFormatter } from './error-formatter.js';

const t = initTRPC.create({ errorFormatter: idempotencyErrorFormatter });
const appRouter = t.router({ pay: t.procedure.mutation(() => 'ok' as const) });
type AppRouter = typeof appRouter;

describe('idempotencyErrorFormatter types', () => {
  it('types error.data.idempotency on the router error shape', () => {
    expectTypeOf<inferRouterError<AppRouter>['data']['idempotency']>().toEqualTypeOf<IdempotencyErrorData | null>();
    expectTypeOf<inferRouterError<AppRouter>['data']['httpStatus']>().toEqualTypeOf<number>();
  });

  it('types error.data.idempotency on the client', () => {
    const client = createTRPCClient<AppRouter>({ links: [httpLink({ url: 'http://x.test/trpc' })] });
    expectTypeOf(client.pay.mutate).returns.resolves.toEqualTypeOf<'ok'>();
    type ClientData = NonNullable<TRPCClientError<AppRouter>['data']>;
    expectTypeOf<ClientData['idempotency']>().toEqualTypeOf<IdempotencyErrorData | null>();
    expectTypeOf<ClientData['idempotencyAnswer']>().toEqualTypeOf<boolean>();
    expectTypeOf<IdempotencyErrorData['reason']>().toEqualTypeOf<
      'key_missing' | 'key_invalid' | 'payload_mismatch' | 'in_progress' | 'store_unavailable' | 'response_too_large'
    >();
  });

  it('keeps the fields an app formatter adds around it', () => {
    const t2 = initTRPC.create({
      errorFormatter: (opts) => {
        const shape = idempotencyErrorFormatter(opts);
        return { ...shape, data: { ...shape.data, requestId: 'r' } };
      },
    });
    const r = t2.router({});
    expectTypeOf<inferRouterError<typeof r>['data']['requestId']>().toEqualTypeOf<string>();
    expectTypeOf<inferRouterError<typeof r>['data']['idempotency']>().toEqualTypeOf<IdempotencyErrorData | null>();
  });
});
