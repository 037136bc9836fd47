import type { AddressInfo } from 'node:net';
import { createTRPCClient, httpBatchLink, httpLink } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { type FetchCreateContextFnOptions, fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { type CreateHTTPContextOptions, createHTTPServer } from '@trpc/server/adapters/standalone';
import { serializeKeyHeader, serializeKeysDictionary } from '@trpc-idempotency/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyErrorFormatter } from '../errors/error-formatter.js';
import { IdempotencyError, isIdempotencyError, toTRPCError } from '../errors/idempotency-error.js';
import { readRequestKey } from '../wire/read-request-key.js';
import { markReplayed, setResponseHeader, setRetryAfter } from './response-headers.js';

// The createContext functions below are the ones docs/adapters.md shows; these tests prove that, with them, the
// header helpers read Idempotency-Key(s) and write Idempotent-Replayed / Retry-After through real tRPC adapters.
// A tiny middleware stands in for the real one, so only the edges are under test here.

const createStandaloneContext = ({ req, res }: CreateHTTPContextOptions) => ({ req, res });
const createFetchContext = ({ req, resHeaders }: FetchCreateContextFnOptions) => ({ req, resHeaders });

const t = initTRPC.context<object>().create({ errorFormatter: idempotencyErrorFormatter });

/** What the middleware saw, per call, for assertions on streamed responses. */
const headerWrites: boolean[] = [];

const withKey = t.middleware(async ({ ctx, batchIndex, next }) => {
  let found: ReturnType<typeof readRequestKey>;
  try {
    found = readRequestKey(ctx, batchIndex);
  } catch (error) {
    throw isIdempotencyError(error) ? toTRPCError(error) : error;
  }
  if (!found) throw toTRPCError(new IdempotencyError('key_missing', 'Send an Idempotency-Key header'));
  return next({ ctx: { found, batchIndex } });
});

const keyed = t.procedure.use(withKey);
const router = t.router({
  echo: keyed
    .input((raw) => (raw ?? {}) as { replay?: boolean; delayMs?: number })
    .mutation(async ({ ctx, input }) => {
      if (input.delayMs) await new Promise((resolve) => setTimeout(resolve, input.delayMs));
      if (input.replay) markReplayed(ctx, ctx.found.form, ctx.batchIndex);
      headerWrites.push(setResponseHeader(ctx, 'X-Probe', String(ctx.batchIndex)));
      return ctx.found;
    }),
  busy: keyed.mutation(({ ctx }) => {
    setRetryAfter(ctx, 1500);
    throw toTRPCError(new IdempotencyError('in_progress', 'Still running: retry later', { retryAfterMs: 1500 }));
  }),
});

type Send = (path: string, init: { body: string; headers?: Record<string, string> }) => Promise<Response>;

const standalone = createHTTPServer({ basePath: '/trpc/', router, createContext: createStandaloneContext });
let standaloneUrl: string;
beforeAll(async () => {
  await new Promise<void>((resolve) => standalone.listen(0, '127.0.0.1', () => resolve()));
  standaloneUrl = `http://127.0.0.1:${(standalone.address() as AddressInfo).port}/trpc`;
});
afterAll(() => new Promise<void>((resolve) => standalone.close(() => resolve())));

const adapters: [string, () => string, Send][] = [
  [
    'standalone createHTTPServer',
    () => standaloneUrl,
    (path, init) =>
      fetch(`${standaloneUrl}/${path}`, {
        method: 'POST',
        body: init.body,
        headers: { 'content-type': 'application/json', ...init.headers },
      }),
  ],
  [
    'fetch adapter (Next.js App Router route handler)',
    () => 'http://fetch.test/trpc',
    (path, init) =>
      fetchRequestHandler({
        endpoint: '/trpc',
        router,
        createContext: createFetchContext,
        req: new Request(`http://fetch.test/trpc/${path}`, {
          method: 'POST',
          body: init.body,
          headers: { 'content-type': 'application/json', ...init.headers },
        }),
      }),
  ],
];

for (const [name, , send] of adapters) {
  describe(name, () => {
    it('reads a single Idempotency-Key and flags a replay with Idempotent-Replayed: true', async () => {
      const res = await send('echo', {
        body: JSON.stringify({ replay: true }),
        headers: { 'Idempotency-Key': serializeKeyHeader('k-1') },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as any).result.data).toEqual({ key: 'k-1', form: 'single' });
      expect(res.headers.get('idempotent-replayed')).toBe('true');
    });

    it('leaves Idempotent-Replayed out when nothing was replayed', async () => {
      const res = await send('echo', { body: '{}', headers: { 'Idempotency-Key': 'raw-key' } });
      expect(((await res.json()) as any).result.data).toEqual({ key: 'raw-key', form: 'single' });
      expect(res.headers.get('idempotent-replayed')).toBeNull();
    });

    it('resolves Idempotency-Keys per batch index and lists the replayed calls', async () => {
      const res = await send('echo,echo,echo?batch=1', {
        body: JSON.stringify({ 0: { replay: true }, 1: {}, 2: { replay: true } }),
        headers: {
          'Idempotency-Keys': serializeKeysDictionary(
            new Map([
              [0, 'a'],
              [1, 'b'],
              [2, 'c'],
            ]),
          ),
        },
      });
      const body = (await res.json()) as any[];
      expect(body.map((r) => r.result.data)).toEqual([
        { key: 'a', form: 'batch' },
        { key: 'b', form: 'batch' },
        { key: 'c', form: 'batch' },
      ]);
      expect(res.headers.get('idempotent-replayed')).toBe('b0, b2');
    });

    it('sends Retry-After in seconds and the typed reason on a 409', async () => {
      const res = await send('busy', { body: '{}', headers: { 'Idempotency-Key': 'k-busy' } });
      expect(res.status).toBe(409);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(((await res.json()) as any).error.data.idempotency).toEqual({
        reason: 'in_progress',
        retryAfterMs: 1500,
      });
    });

    it('answers a malformed key with 400 key_invalid', async () => {
      const res = await send('echo', { body: '{}', headers: { 'Idempotency-Key': '"unterminated' } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.data.idempotency).toEqual({ reason: 'key_invalid' });
    });

    it('still answers every call of a streamed batch right (headers went out before the calls resolved)', async () => {
      headerWrites.length = 0;
      const res = await send('echo,echo?batch=1', {
        body: JSON.stringify({ 0: { replay: true, delayMs: 30 }, 1: { delayMs: 30 } }),
        headers: { 'Idempotency-Keys': 'b0="s0", b1="s1"', 'trpc-accept': 'application/jsonl' },
      });
      const text = await res.text();
      expect(res.status).toBe(200);
      expect(text).toContain('"s0"');
      expect(text).toContain('"s1"');
      // Too late for headers: the standalone adapter refuses the write, the fetch adapter's Headers are already
      // copied into the Response. Either way the response carries no replay flag rather than a wrong one.
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(res.headers.get('x-probe')).toBeNull();
      if (name.startsWith('standalone')) expect(headerWrites).toEqual([false, false]);
    });
  });
}

describe('fetch adapter with CORS headers from responseMeta (docs/adapters.md)', () => {
  it('sends both the CORS headers and the replay flag', async () => {
    const res = await fetchRequestHandler({
      endpoint: '/trpc',
      router,
      createContext: createFetchContext,
      responseMeta: () => ({
        headers: new Headers({ 'Access-Control-Expose-Headers': 'Idempotent-Replayed, Retry-After' }),
      }),
      req: new Request('http://fetch.test/trpc/echo', {
        method: 'POST',
        body: JSON.stringify({ replay: true }),
        headers: { 'content-type': 'application/json', 'Idempotency-Key': 'cors-1' },
      }),
    });
    expect(res.headers.get('access-control-expose-headers')).toBe('Idempotent-Replayed, Retry-After');
    expect(res.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('with the real tRPC client', () => {
  it('sends Idempotency-Keys from httpBatchLink and sees the replay list on the response', async () => {
    const seen: Response[] = [];
    const client = createTRPCClient<typeof router>({
      links: [
        httpBatchLink({
          url: standaloneUrl,
          headers: ({ opList }) => ({
            'Idempotency-Keys': serializeKeysDictionary(
              new Map(opList.map((op, index) => [index, String(op.context.key)])),
            ),
          }),
          fetch: async (url, init) => {
            const res = await fetch(url, init);
            seen.push(res);
            return res;
          },
        }),
      ],
    });
    const [first, second] = await Promise.all([
      client.echo.mutate({ replay: false }, { context: { key: 'client-0' } }),
      client.echo.mutate({ replay: true }, { context: { key: 'client-1' } }),
    ]);
    expect(first).toEqual({ key: 'client-0', form: 'batch' });
    expect(second).toEqual({ key: 'client-1', form: 'batch' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.get('idempotent-replayed')).toBe('b1');
  });

  it('sends Idempotency-Key from httpLink for a single call', async () => {
    const client = createTRPCClient<typeof router>({
      links: [httpLink({ url: standaloneUrl, headers: () => ({ 'Idempotency-Key': serializeKeyHeader('one') }) })],
    });
    await expect(client.echo.mutate({})).resolves.toEqual({ key: 'one', form: 'single' });
  });
});
