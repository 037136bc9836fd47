import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTRPCClient, httpLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, idempotencyErrorFormatter } from '../index.js';
import { headerOf, loadWireVectors } from '../wire/__tests__/wire-vectors.js';
import { type Backend, deferred, openBackend } from './harness.js';

interface HttpCtx {
  req: IncomingMessage;
  res: ServerResponse;
  userId: string;
}

const vectors = loadWireVectors();

describe('over HTTP (standalone adapter, superjson router)', () => {
  let backend: Backend;
  let url: string;
  let close: () => void;
  let runs = 0;
  const slowStarted = deferred();
  const slowGate = deferred();
  const seenKeys: string[] = [];

  beforeAll(async () => {
    backend = await openBackend('pg-fast');
    const t = initTRPC.context<HttpCtx>().create({ transformer: superjson, errorFormatter: idempotencyErrorFormatter });
    const idempotency = createIdempotency({
      db: backend.db,
      pool: backend.pool,
      scope: ({ ctx }: { ctx: HttpCtx }) => `user:${ctx.userId}`,
      serializer: superjson,
    });
    await idempotency.migrate();
    const impatient = createIdempotency({
      db: backend.db,
      pool: backend.pool,
      scope: ({ ctx }: { ctx: HttpCtx }) => `user:${ctx.userId}`,
      wait: 0,
    });
    const router = t.router({
      slow: t.procedure.use(impatient.middleware).mutation(async () => {
        slowStarted.resolve();
        await slowGate.promise;
        return 'done';
      }),
      pay: t.procedure
        .use(idempotency.middleware)
        .input(z.object({ amount: z.number() }))
        .mutation(({ ctx, input }) => {
          runs++;
          seenKeys.push(ctx.idempotency.key);
          return { amount: input.amount, at: new Date(1_700_000_000_000 + input.amount), tags: new Map([['n', runs]]) };
        }),
    });
    const server = createHTTPServer({
      router,
      createContext: ({ req, res }) => ({ req, res, userId: String(req.headers['x-user'] ?? 'h') }),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => server.close();
  });
  afterAll(async () => {
    close?.();
    await backend?.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string>) =>
    fetch(`${url}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('replays a Date and a Map output as Date and Map, with Idempotent-Replayed: true', async () => {
    const replayedHeader: (string | null)[] = [];
    const client: any = createTRPCClient<any>({
      links: [
        httpLink({
          url,
          transformer: superjson,
          headers: { 'Idempotency-Key': '"http-date-1"' },
          fetch: async (input, init) => {
            const response = await fetch(input, init as RequestInit);
            replayedHeader.push(response.headers.get('idempotent-replayed'));
            return response;
          },
        }),
      ],
    });
    const first = await client.pay.mutate({ amount: 42 });
    const before = runs;
    const second = await client.pay.mutate({ amount: 42 });
    expect(runs).toBe(before);
    expect(second.at).toBeInstanceOf(Date);
    expect(second.at.getTime()).toBe(first.at.getTime());
    expect(second.tags).toBeInstanceOf(Map);
    expect(second).toEqual(first);
    expect(replayedHeader).toEqual([null, 'true']);
  });

  it('answers a duplicate of a running call with 409 in_progress, retryAfterMs and Retry-After', async () => {
    const first = post('slow', { json: null }, { 'Idempotency-Key': 'slow-1' });
    await slowStarted.promise;
    const second = await post('slow', { json: null }, { 'Idempotency-Key': 'slow-1' });
    expect(second.status).toBe(409);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await second.json()).error.json.data.idempotency).toEqual({ reason: 'in_progress', retryAfterMs: 1000 });
    slowGate.resolve();
    expect((await first).status).toBe(200);
    const replayed = await post('slow', { json: null }, { 'Idempotency-Key': 'slow-1' });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
  });

  it('answers a malformed key with 400 and error.data.idempotency.reason, storing nothing', async () => {
    const response = await post('pay', { json: { amount: 1 } }, { 'Idempotency-Key': '"unterminated' });
    expect(response.status).toBe(400);
    const body = await response.json();
    expect(body.error.json.data.idempotency).toEqual({ reason: 'key_invalid' });
    expect(await backend.query(`SELECT 1 FROM idempotency_keys WHERE key LIKE '%unterminated%'`)).toEqual([]);
  });

  it('resolves Idempotency-Keys by batchIndex and flags only the replayed calls of a batch', async () => {
    const batch = (keys: string) =>
      post(
        'pay,pay,pay?batch=1',
        { 0: { json: { amount: 100 } }, 1: { json: { amount: 101 } }, 2: { json: { amount: 102 } } },
        {
          'Idempotency-Keys': keys,
        },
      );
    const first = await batch('b0="bk-0", b2="bk-2"');
    expect(first.status).toBe(207); // b1 has no key: key_missing for that call, the others ran
    const firstBody = (await first.json()) as any[];
    expect(firstBody[1].error.json.data.idempotency).toEqual({ reason: 'key_missing' });
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await batch('b0="bk-0", b1="bk-1", b2="bk-2"');
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('b0, b2');
    const againBody = (await again.json()) as any[];
    expect(superjson.deserialize<any>(againBody[0].result.data).at).toBeInstanceOf(Date);
    expect(seenKeys.slice(-3)).toEqual(['bk-0', 'bk-2', 'bk-1']);
  });

  it('applies a lone Idempotency-Key to batchIndex 0 only', async () => {
    const response = await post(
      'pay,pay?batch=1',
      { 0: { json: { amount: 7 } }, 1: { json: { amount: 8 } } },
      { 'Idempotency-Key': 'lone-key-1' },
    );
    const body = (await response.json()) as any[];
    expect(body[0].result).toBeDefined();
    expect(body[1].error.json.data.idempotency).toEqual({ reason: 'key_missing' });
  });

  it('passes every Idempotency-Key vector end to end: the key stored, or 400 key_invalid', async () => {
    let index = 0;
    for (const vector of vectors.key) {
      const header = headerOf(vector);
      const expectedKey = vector.key ?? vector.repeat?.char.repeat(vector.repeat.count);
      let response: Response;
      try {
        response = await post(
          'pay',
          { json: { amount: 1000 } },
          { 'Idempotency-Key': header, 'x-user': `key-vector-${index++}` },
        );
      } catch {
        // fetch itself refuses some raw bytes in a header value; the parser tests cover those.
        expect(vector.error).toBe('key_invalid');
        continue;
      }
      if (vector.error) {
        expect(response.status, header).toBe(400);
        expect((await response.json()).error.json.data.idempotency.reason).toBe(vector.error);
      } else {
        expect(response.status, header).toBe(200);
        expect(seenKeys.at(-1)).toBe(expectedKey);
      }
    }
  });

  it('passes every Idempotency-Keys vector end to end for batchIndex 0', async () => {
    let index = 0;
    for (const vector of vectors.batch) {
      const response = await post(
        'pay?batch=1',
        { 0: { json: { amount: 2000 } } },
        { 'Idempotency-Keys': vector.header, 'x-user': `batch-vector-${index++}` },
      ).catch(() => undefined);
      if (!response) {
        expect(vector.error).toBe('key_invalid');
        continue;
      }
      const body = (await response.json()) as any[];
      if (vector.error) {
        expect(body[0].error?.json.data.idempotency.reason, vector.header).toBe(vector.error);
      } else if (vector.keys?.['0'] !== undefined) {
        expect(body[0].result, vector.header).toBeDefined();
        expect(seenKeys.at(-1)).toBe(vector.keys['0']);
      } else {
        expect(body[0].error?.json.data.idempotency.reason, vector.header).toBe('key_missing');
      }
    }
  });
});
