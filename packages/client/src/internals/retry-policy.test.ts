import { TRPCClientError } from '@trpc/client';
import { describe, expect, test } from 'vitest';
import { idempotencyFetch } from '../idempotency-fetch.js';
import { classifyError } from './retry-policy.js';

const now = Date.UTC(2026, 0, 1, 12, 0, 0);

/** The error httpLink makes from a response: TRPCClientError.from(body, { meta: { response } }). */
async function errorFrom(response: Response) {
  const res = await idempotencyFetch(async () => response)('http://api/trpc/pay');
  return TRPCClientError.from((await res.json()) as object, { meta: { response: res } });
}

const trpcError = (httpStatus: number, idempotency?: object, headers?: Record<string, string>) =>
  errorFrom(
    Response.json(
      { error: { code: -32603, message: 'x', data: { httpStatus, ...(idempotency && { idempotency }) } } },
      { status: httpStatus, headers },
    ),
  );

describe('classifyError', () => {
  test('no HTTP answer at all (network failure, unreadable body) is retried', () => {
    expect(classifyError(TRPCClientError.from(new TypeError('fetch failed')), now)).toEqual({ retry: true });
  });

  test("a proxy's HTML 503 read through idempotencyFetch is retried after its Retry-After", async () => {
    const error = await errorFrom(
      new Response('<html>503</html>', { status: 503, headers: { 'content-type': 'text/html', 'retry-after': '1' } }),
    );
    expect(classifyError(error, now)).toEqual({ retry: true, retryAfterMs: 1000 });
  });

  test("a proxy's HTML 4xx page read through idempotencyFetch is not retried", async () => {
    for (const status of [400, 403, 404, 409, 418]) {
      expect(classifyError(await errorFrom(new Response('<html/>', { status })), now)).toEqual({ retry: false });
    }
  });

  test("store_unavailable and in_progress are retried after the server's retryAfterMs, over the header's", async () => {
    const unavailable = await trpcError(
      503,
      { reason: 'store_unavailable', retryAfterMs: 250 },
      { 'retry-after': '9' },
    );
    expect(classifyError(unavailable, now)).toEqual({ retry: true, retryAfterMs: 250 });
    const inProgress = await trpcError(409, { reason: 'in_progress' }, { 'retry-after': '2' });
    expect(classifyError(inProgress, now)).toEqual({ retry: true, retryAfterMs: 2000 });
  });

  test('response_too_large is never retried, though it is a 500', async () => {
    expect(classifyError(await trpcError(500, { reason: 'response_too_large' }), now)).toEqual({ retry: false });
  });

  test("a batch member's own httpStatus wins over the batch response's 207", () => {
    const response = new Response(null, { status: 207 });
    const body = { error: { code: -32603, message: 'x', data: { httpStatus: 502 } } };
    expect(classifyError(TRPCClientError.from(body, { meta: { response } }), now)).toEqual({ retry: true });
  });
});

describe('classifyError with waits that are not finite', () => {
  test('a retryAfterMs that JSON read as Infinity (1e400) is ignored: the link falls back to its backoff', () => {
    const body = JSON.parse(
      '{"error":{"code":-32603,"message":"x","data":{"httpStatus":409,' +
        '"idempotency":{"reason":"in_progress","retryAfterMs":1e400}}}}',
    ) as object;
    const error = TRPCClientError.from(body, { meta: { response: new Response(null, { status: 409 }) } });
    expect(classifyError(error, now)).toEqual({ retry: true });
  });
});
