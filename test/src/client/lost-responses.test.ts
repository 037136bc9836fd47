import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
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

describe('responses lost after the server committed', () => {
  test('every mutation executes exactly once and resolves with the original result, flagged as replayed', async () => {
    // The first request of every key commits on the server, then its connection dies before any byte returns.
    server.setFault((req, before) => (before.some((r) => r.key === req.key) ? 'pass' : 'drop-after-commit'));
    const client = createTestClient(server.url);
    const executionsBefore = app.executions.get('payments.create') ?? 0;
    const firstRequest = server.seen.length;

    const infos = Array.from({ length: 8 }, newInfo);
    const results = await Promise.all(
      infos.map((info, i) => client.payments.create.mutate({ amount: i + 1 }, { context: { idempotencyInfo: info } })),
    );

    expect(app.executions.get('payments.create')! - executionsBefore).toBe(8);
    const rows = await app.rowsPerKey();
    results.forEach((result, i) => {
      const info = infos[i]!;
      expect(result).toMatchObject({ amount: i + 1, key: info.key });
      expect(rows.get(info.key!)).toBe(1);
      expect(info).toMatchObject({ attempts: 2, replayed: true, settled: true });
      const requests = server.seen.slice(firstRequest).filter((r) => unquote(r.key) === info.key);
      expect(requests.map((r) => r.fault)).toEqual(['drop-after-commit', 'pass']);
      // Sent as an RFC 8941 String, the same key on every attempt.
      expect(requests.map((r) => r.key)).toEqual([`"${info.key}"`, `"${info.key}"`]);
    });
  });

  test('with httpBatchLink, concurrent keyed mutations in one batch each get their own key and execute once', async () => {
    let batches = 0;
    server.setFault((req) => (req.path.includes(',') && batches++ === 0 ? 'drop-after-commit' : 'pass'));
    const client = createTestClient(server.url, { batch: true });
    const executionsBefore = app.executions.get('payments.create') ?? 0;
    const firstRequest = server.seen.length;

    const infos = Array.from({ length: 4 }, newInfo);
    const results = await Promise.all(
      infos.map((info, i) =>
        client.payments.create.mutate({ amount: 100 + i }, { context: { idempotencyInfo: info } }),
      ),
    );

    const requests = server.seen.slice(firstRequest);
    expect(requests[0]!.fault).toBe('drop-after-commit');
    expect(requests[0]!.path.split(',')).toHaveLength(4);
    const keys = infos.map((info) => info.key!);
    expect(new Set(keys).size).toBe(4);
    expect(requests[0]!.keys).toBe(keys.map((k, i) => `b${i}="${k}"`).join(', '));
    expect(app.executions.get('payments.create')! - executionsBefore).toBe(4);
    const rows = await app.rowsPerKey();
    results.forEach((result, i) => {
      expect(result).toMatchObject({ amount: 100 + i, key: keys[i] });
      expect(rows.get(keys[i]!)).toBe(1);
      expect(infos[i]).toMatchObject({ attempts: 2, replayed: true });
    });
  });

  test('with httpBatchStreamLink, a batch whose stream dies is retried and each mutation still executes once', async () => {
    // A streamed batch sends its head before the calls resolve: the connection dies at that first byte.
    let batches = 0;
    server.setFault((req) => (req.path.includes(',') && batches++ === 0 ? 'drop-after-commit' : 'pass'));
    const client = createTestClient(server.url, { batch: 'stream' });
    const executionsBefore = app.executions.get('payments.create') ?? 0;
    const firstRequest = server.seen.length;

    const infos = Array.from({ length: 3 }, newInfo);
    const results = await Promise.all(
      infos.map((info, i) =>
        client.payments.create.mutate({ amount: 200 + i }, { context: { idempotencyInfo: info } }),
      ),
    );

    const keys = infos.map((info) => info.key!);
    expect(server.seen[firstRequest]!.keys).toBe(keys.map((k, i) => `b${i}="${k}"`).join(', '));
    expect(app.executions.get('payments.create')! - executionsBefore).toBe(3);
    const rows = await app.rowsPerKey();
    results.forEach((result, i) => {
      expect(result).toMatchObject({ amount: 200 + i, key: keys[i] });
      expect(rows.get(keys[i]!)).toBe(1);
      expect(infos[i]!.attempts).toBe(2);
    });
  });
});
