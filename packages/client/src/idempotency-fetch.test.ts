import { describe, expect, test } from 'vitest';
import { idempotencyFetch } from './idempotency-fetch.js';

const serve = (response: Response) => idempotencyFetch(async () => response);

describe('idempotencyFetch', () => {
  test("a proxy's HTML 503 becomes a tRPC-shaped JSON error with its status and Retry-After", async () => {
    const res = await serve(
      new Response('<html><body>503 Service Unavailable</body></html>', {
        status: 503,
        statusText: 'Service Unavailable',
        headers: { 'content-type': 'text/html', 'retry-after': '1' },
      }),
    )('http://api/trpc/pay', { method: 'POST' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toMatchObject({
      error: { code: -32603, data: { code: 'SERVICE_UNAVAILABLE', httpStatus: 503, nonTrpcResponse: true } },
    });
  });

  test("a gateway's JSON error that is not tRPC's is wrapped the same way", async () => {
    const res = await serve(Response.json({ message: 'Bad gateway' }, { status: 502 }))('http://api/trpc/pay');
    expect(await res.json()).toMatchObject({ error: { data: { httpStatus: 502, nonTrpcResponse: true } } });
  });

  test('an unknown 4xx page keeps its status and reads as a client error', async () => {
    const res = await serve(new Response('nope', { status: 418 }))('http://api/trpc/pay');
    expect(res.status).toBe(418);
    expect(await res.json()).toMatchObject({ error: { data: { code: 'BAD_REQUEST', httpStatus: 418 } } });
  });

  test("tRPC's own error bodies, single or batched, pass through unchanged", async () => {
    const single = { error: { code: -32009, message: 'taken', data: { httpStatus: 409 } } };
    expect(await (await serve(Response.json(single, { status: 409 }))('u')).json()).toEqual(single);
    const batch = [{ result: { data: 1 } }, single];
    expect(await (await serve(Response.json(batch, { status: 207 }))('u')).json()).toEqual(batch);
  });

  test('a successful response is returned as it is, unread', async () => {
    const ok = Response.json({ result: { data: 'x' } });
    expect(await serve(ok)('u')).toBe(ok);
  });
});
