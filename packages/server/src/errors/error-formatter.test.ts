import { getTRPCErrorShape, initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { describe, expect, it } from 'vitest';
import { getIdempotencyErrorData, idempotencyErrorFormatter } from './error-formatter.js';
import { IdempotencyError, toTRPCError } from './idempotency-error.js';

const t = initTRPC.create({ errorFormatter: idempotencyErrorFormatter });
const router = t.router({
  busy: t.procedure.mutation(() => {
    throw toTRPCError(
      new IdempotencyError('in_progress', 'The original call is still running', { retryAfterMs: 2500 }),
    );
  }),
  missing: t.procedure.mutation(() => {
    throw toTRPCError(new IdempotencyError('key_missing', 'Send an Idempotency-Key header'));
  }),
  notFound: t.procedure.mutation(() => {
    throw new TRPCError({ code: 'NOT_FOUND', message: 'no order' });
  }),
  crash: t.procedure.mutation(() => {
    throw new Error('boom');
  }),
});

async function post(path: string): Promise<{ status: number; body: any }> {
  const res = await fetchRequestHandler({
    endpoint: '/trpc',
    router,
    req: new Request(`http://x.test/trpc/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }),
  });
  return { status: res.status, body: await res.json() };
}

describe('idempotencyErrorFormatter over HTTP (fetchRequestHandler)', () => {
  it('puts reason and retryAfterMs in error.data.idempotency of a 409', async () => {
    const { status, body } = await post('busy');
    expect(status).toBe(409);
    expect(body.error.data.idempotency).toEqual({ reason: 'in_progress', retryAfterMs: 2500 });
    expect(body.error.data.code).toBe('CONFLICT');
    expect(body.error.message).toBe('The original call is still running');
  });

  it('sends only the reason when there is no retry delay', async () => {
    const { status, body } = await post('missing');
    expect(status).toBe(400);
    expect(body.error.data.idempotency).toEqual({ reason: 'key_missing' });
  });

  it('sends idempotency: null for errors that are not about idempotency', async () => {
    for (const path of ['notFound', 'crash']) {
      const { body } = await post(path);
      expect(body.error.data.idempotency, path).toBeNull();
    }
  });

  it("keeps tRPC's default data fields", async () => {
    const { body } = await post('notFound');
    expect(body.error.data).toMatchObject({ code: 'NOT_FOUND', httpStatus: 404, path: 'notFound' });
  });
});

describe('idempotencyErrorFormatter through createCaller', () => {
  it('lets a server-side caller reach the reason and build the same error shape', async () => {
    const caller = t.createCallerFactory(router)({});
    const error = await caller.busy().then(
      () => expect.unreachable(),
      (e: unknown) => e as TRPCError,
    );
    expect(error).toBeInstanceOf(TRPCError);
    expect(error.code).toBe('CONFLICT');
    expect(getIdempotencyErrorData(error)).toEqual({ reason: 'in_progress', retryAfterMs: 2500 });
    // getErrorShape is what every adapter calls; with this router's config it carries data.idempotency.
    const shape = getTRPCErrorShape({
      config: router._def._config,
      error,
      type: 'mutation',
      path: 'busy',
      input: undefined,
      ctx: {},
    });
    expect(shape.data.idempotency).toEqual({ reason: 'in_progress', retryAfterMs: 2500 });
    expect(shape.data.httpStatus).toBe(409);
  });

  it('works when called from an app formatter that adds its own fields', async () => {
    const t2 = initTRPC.create({
      errorFormatter: (opts) => {
        const shape = idempotencyErrorFormatter(opts);
        return { ...shape, data: { ...shape.data, requestId: 'r-1' } };
      },
    });
    const r = t2.router({ missing: router._def.procedures.missing });
    const res = await fetchRequestHandler({
      endpoint: '/trpc',
      router: r,
      req: new Request('http://x.test/trpc/missing', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      }),
    });
    const body = (await res.json()) as any;
    expect(body.error.data).toMatchObject({ idempotency: { reason: 'key_missing' }, requestId: 'r-1' });
  });

  it('finds the reason through an app error that wraps the TRPCError again', () => {
    const wrapped = new TRPCError({
      code: 'CONFLICT',
      cause: toTRPCError(new IdempotencyError('payload_mismatch', 'different input')),
    });
    expect(getIdempotencyErrorData(wrapped)).toEqual({ reason: 'payload_mismatch' });
  });

  it('stops on a cyclic cause chain', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(getIdempotencyErrorData(a)).toBeNull();
  });
});
