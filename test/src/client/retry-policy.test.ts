import { TRPCClientError } from '@trpc/client';
import { getIdempotencyReason, isIdempotencyError } from '@trpc-idempotency/client';
import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, test } from 'vitest';
import { createTestClient, newInfo, unquote } from './support/client.ts';
import { createClientTestApp } from './support/client-test-app.ts';
import { type Fault, type SeenRequest, startFaultServer } from './support/fault-server.ts';

let tdb: TestDatabase;
let app: ReturnType<typeof createClientTestApp>;
let server: Awaited<ReturnType<typeof startFaultServer>>;
/** A second server on the same database whose duplicates answer 409 in_progress at once (`wait: 0`). */
let impatient: Awaited<ReturnType<typeof startFaultServer>>;
let impatientApp: ReturnType<typeof createClientTestApp>;

beforeAll(async () => {
  tdb = await createTestDatabase(inject('pgAdminUrl'));
  app = createClientTestApp(tdb.db);
  await app.setup();
  server = await startFaultServer({ router: app.router, createContext: app.createContext });
  impatientApp = createClientTestApp(tdb.db, { wait: 0 });
  impatient = await startFaultServer({ router: impatientApp.router, createContext: impatientApp.createContext });
});
afterAll(async () => {
  await server?.close();
  await impatient?.close();
  await tdb?.drop();
});
beforeEach(() => server.setFault(() => 'pass'));

/** Runs `fn` and returns the HTTP requests it caused. */
async function requestsOf(
  fn: () => Promise<unknown>,
  target = server,
): Promise<{ requests: SeenRequest[]; error: unknown }> {
  const from = target.seen.length;
  let error: unknown;
  await fn().catch((e: unknown) => {
    error = e;
  });
  return { requests: target.seen.slice(from), error };
}

const status = (error: unknown) => (error as TRPCClientError<any>).data?.httpStatus;

describe('never retried', () => {
  test('a 422 payload_mismatch (key reused for another input) is one HTTP request', async () => {
    const client = createTestClient(server.url);
    await client.payments.create.mutate({ amount: 1 }, { context: { idempotencyKey: 'reused-key' } });
    const { requests, error } = await requestsOf(() =>
      client.payments.create.mutate({ amount: 2 }, { context: { idempotencyKey: 'reused-key' } }),
    );
    expect(requests).toHaveLength(1);
    expect(status(error)).toBe(422);
    expect(isIdempotencyError(error, 'payload_mismatch')).toBe(true);
  });

  test('a 400 (invalid input) is one HTTP request', async () => {
    const client = createTestClient(server.url);
    const { requests, error } = await requestsOf(() => client.payments.create.mutate({ amount: -5 }));
    expect(requests).toHaveLength(1);
    expect(status(error)).toBe(400);
  });

  test('a 401 is one HTTP request', async () => {
    const client = createTestClient(server.url, { user: null });
    const { requests, error } = await requestsOf(() => client.payments.create.mutate({ amount: 1 }));
    expect(requests).toHaveLength(1);
    expect(status(error)).toBe(401);
  });

  test('a business CONFLICT thrown by the resolver is one HTTP request and carries no idempotency reason', async () => {
    const client = createTestClient(server.url);
    const { requests, error } = await requestsOf(() => client.payments.refund.mutate({ id: 7 }));
    expect(requests).toHaveLength(1);
    expect(status(error)).toBe(409);
    expect(getIdempotencyReason(error)).toBeUndefined();
    expect(app.executions.get('payments.refund')).toBe(1);
  });

  test('the same key after a business CONFLICT gets the stored error back, flagged as replayed, without running again', async () => {
    const client = createTestClient(server.url);
    const before = app.executions.get('payments.refund') ?? 0;
    const first = newInfo();
    const again = newInfo();
    const errors = [];
    for (const info of [first, again]) {
      errors.push(
        await client.payments.refund
          .mutate({ id: 8 }, { context: { idempotencyKey: 'refund-8', idempotencyInfo: info } })
          .catch((e: unknown) => e),
      );
    }
    expect(errors.map(status)).toEqual([409, 409]);
    expect(first.replayed).toBe(false);
    expect(again).toMatchObject({ attempts: 1, replayed: true });
    expect(app.executions.get('payments.refund')! - before).toBe(1);
  });

  test("a proxy's HTML 403 page is one HTTP request, its status kept", async () => {
    server.setFault(() => 'html-403');
    const client = createTestClient(server.url);
    const { requests, error } = await requestsOf(() => client.payments.create.mutate({ amount: 1 }));
    expect(requests).toHaveLength(1);
    expect(error).toBeInstanceOf(TRPCClientError);
    expect(status(error)).toBe(403);
  });
});

describe('retried', () => {
  test('the idempotency in_progress 409 is retried until the original finishes, then replays it', async () => {
    // Enough attempts that a slow machine still sees the original finish within the retries.
    const client = createTestClient(impatient.url, { link: { attempts: 10 } });
    const key = 'slow-original';
    const original = client.payments.create.mutate({ amount: 9, delayMs: 1500 }, { context: { idempotencyKey: key } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const info = newInfo();
    const { requests, error } = await requestsOf(
      () =>
        client.payments.create.mutate(
          { amount: 9, delayMs: 1500 },
          { context: { idempotencyKey: key, idempotencyInfo: info } },
        ),
      impatient,
    );
    expect(error).toBeUndefined();
    expect(requests.length).toBeGreaterThanOrEqual(2);
    expect(info.attempts).toBe(requests.length);
    expect(info.replayed).toBe(true);
    expect(await original).toMatchObject({ amount: 9, key });
    expect(impatientApp.executions.get('payments.create')).toBe(1);
  });

  test.each([
    ['httpLink', false],
    ['httpBatchLink', true],
  ])("a proxy's HTML 503 with Retry-After: 1 is retried no sooner than 1 s later (%s)", async (_, batch) => {
    server.setFault((req, before) => (before.some((r) => r.key && r.key === req.key) ? 'pass' : 'html-503'));
    const client = createTestClient(server.url, { batch });
    const info = newInfo();
    const { requests, error } = await requestsOf(() =>
      client.payments.create.mutate({ amount: 3 }, { context: { idempotencyInfo: info } }),
    );
    expect(error).toBeUndefined();
    expect(requests.map((r) => r.fault)).toEqual(['html-503', 'pass']);
    expect(requests[1]!.at - requests[0]!.at).toBeGreaterThanOrEqual(1000);
    expect(unquote(requests[1]!.key)).toBe(info.key);
    expect(info).toMatchObject({ attempts: 2, replayed: false });
  });
});

describe('not opted in', () => {
  test('a query and a mutation outside `procedures` are one HTTP request each, without a key header', async () => {
    server.setFault((): Fault => 'html-503-no-retry-after');
    const client = createTestClient(server.url);
    const query = await requestsOf(() => client.payments.list.query());
    const mutation = await requestsOf(() => client.orders.note.mutate({ text: 'hi' }));
    for (const { requests, error } of [query, mutation]) {
      expect(status(error)).toBe(503);
      expect(requests).toHaveLength(1);
      expect(requests[0]).toMatchObject({ key: undefined, keys: undefined });
    }
  });
});
