import type { IdempotencySettledEvent } from '@trpc-idempotency/client';
import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { afterAll, beforeAll, expect, inject, test } from 'vitest';
import { createTestClient, newInfo, unquote } from './support/client.ts';
import { createClientTestApp } from './support/client-test-app.ts';
import { startFaultServer } from './support/fault-server.ts';

let tdb: TestDatabase;
let app: ReturnType<typeof createClientTestApp>;
let server: Awaited<ReturnType<typeof startFaultServer>>;

beforeAll(async () => {
  tdb = await createTestDatabase(inject('pgAdminUrl'));
  app = createClientTestApp(tdb.db);
  await app.setup();
  server = await startFaultServer({ router: app.router, createContext: app.createContext });
});
afterAll(async () => {
  await server?.close();
  await tdb?.drop();
});

test('a hung attempt is aborted after attemptTimeoutMs and retried with the same key; the call resolves once the server answers', async () => {
  server.setFault((_, before) => (before.length === 0 ? 'hang' : 'pass'));
  const client = createTestClient(server.url, { link: { attemptTimeoutMs: 400 } });
  const info = newInfo();
  const result = await client.payments.create.mutate({ amount: 5 }, { context: { idempotencyInfo: info } });

  expect(result).toMatchObject({ amount: 5, key: info.key });
  expect(server.seen.map((r) => r.fault)).toEqual(['hang', 'pass']);
  expect(server.seen.map((r) => unquote(r.key))).toEqual([info.key, info.key]);
  // The client gave up on the hung request (closed its connection) before it sent the retry.
  expect(server.seen[0]!.abandonedAt).toBeDefined();
  expect(server.seen[0]!.abandonedAt!).toBeLessThanOrEqual(server.seen[1]!.at);
  expect(info.attempts).toBe(2);
  expect(app.executions.get('payments.create')).toBe(1);
});

test("with httpBatchLink, a timed-out attempt's late answer (its batch sibling kept the request alive) never ends the call without the server's result", async () => {
  server.setFault(() => 'pass');
  const settled: IdempotencySettledEvent[] = [];
  // The retry waits 1 s (no jitter), so the first attempt's late answer (~600 ms) comes while it is pending.
  const client = createTestClient(server.url, {
    batch: true,
    link: { attemptTimeoutMs: 300, baseDelayMs: 1_000, jitter: 'none', onSettled: (e) => settled.push(e) },
  });
  const info = newInfo();
  const executionsBefore = app.executions.get('payments.create') ?? 0;
  const firstRequest = server.seen.length;

  // Same tick, one batch: the unguarded sibling keeps the HTTP request alive after the guarded attempt gives up.
  const [payment, note] = await Promise.allSettled([
    client.payments.create.mutate({ amount: 7, delayMs: 600 }, { context: { idempotencyInfo: info } }),
    client.orders.note.mutate({ text: 'sibling' }),
  ]);

  expect(server.seen[firstRequest]!.path).toBe('/payments.create,orders.note');
  expect(note).toEqual({ status: 'fulfilled', value: 'sibling' });
  // The server charged once; the caller must be given that charge, never an error or an empty completion.
  expect(app.executions.get('payments.create')! - executionsBefore).toBe(1);
  expect(payment).toMatchObject({ status: 'fulfilled', value: { amount: 7, key: info.key } });
  expect(settled).toHaveLength(1);
  expect(settled[0]!.error).toBeUndefined();
  expect(info.settled).toBe(true);
  const rows = await app.rowsPerKey();
  expect(rows.get(info.key!)).toBe(1);
});

test("with httpBatchLink, a timed-out attempt's late answer racing its retry (held on the server until the original commits) gives the caller the one payment, whichever answer wins", async () => {
  server.setFault(() => 'pass');
  const settled: IdempotencySettledEvent[] = [];
  // The retry goes out at ~300-350 ms and waits on the server for the original (600 ms) to commit.
  const client = createTestClient(server.url, {
    batch: true,
    link: { attemptTimeoutMs: 300, baseDelayMs: 50, onSettled: (e) => settled.push(e) },
  });
  const info = newInfo();
  const executionsBefore = app.executions.get('payments.create') ?? 0;

  const [payment, note] = await Promise.allSettled([
    client.payments.create.mutate({ amount: 8, delayMs: 600 }, { context: { idempotencyInfo: info } }),
    client.orders.note.mutate({ text: 'sibling' }),
  ]);

  expect(note).toEqual({ status: 'fulfilled', value: 'sibling' });
  expect(app.executions.get('payments.create')! - executionsBefore).toBe(1);
  expect(payment).toMatchObject({ status: 'fulfilled', value: { amount: 8, key: info.key } });
  expect(settled.map((e) => e.error)).toEqual([undefined]);
  // At least the retry: on a loaded machine the retry, held until the original commits, can itself outlast the
  // 300 ms attempt timeout and a third attempt replays (seen at load 9-18). The charge and the answer are the point.
  expect(info.attempts).toBeGreaterThanOrEqual(2);
  const rows = await app.rowsPerKey();
  expect(rows.get(info.key!)).toBe(1);
});
