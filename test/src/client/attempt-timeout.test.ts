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
