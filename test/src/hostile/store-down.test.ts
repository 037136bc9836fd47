import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPaymentsServer } from '../harness/in-process-server.ts';
import { callRaw } from '../harness/trpc-http.ts';

/** A port nothing listens on: the database is "down" before the first request. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', () => resolve()));
  const address = srv.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

let db: Kysely<any>;
const servers: Partial<Record<'transaction' | 'lease', Awaited<ReturnType<typeof startPaymentsServer>>>> = {};

beforeAll(async () => {
  const pool = new pg.Pool({
    connectionString: `postgres://postgres@127.0.0.1:${await closedPort()}/none`,
    connectionTimeoutMillis: 1_000,
  });
  pool.on('error', () => {});
  db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
  servers.transaction = await startPaymentsServer({ db, migrate: false });
  servers.lease = await startPaymentsServer({ db, mode: 'lease', migrate: false });
});

afterAll(async () => {
  await servers.transaction?.close();
  await servers.lease?.close();
  await db?.destroy();
});

describe.each(['transaction', 'lease'] as const)('the database is unreachable at the claim (%s mode)', (mode) => {
  it('answers 503 store_unavailable with a retry hint and never runs the handler', async () => {
    const server = servers[mode];
    if (!server) throw new Error('server not started');
    for (const path of ['payments.create', 'payments.echo']) {
      const res = await callRaw({
        port: server.port,
        path,
        input: { ref: `down-${mode}`, amount: 1 },
        key: `"${randomUUID()}"`,
      });
      expect(res.status, res.body.slice(0, 300)).toBe(503);
      expect(res.code).toBe('SERVICE_UNAVAILABLE');
      expect(res.reason).toBe('store_unavailable');
      const retryAfterMs = (res.json as { error: { data: { idempotency: { retryAfterMs?: number } } } }).error.data
        .idempotency.retryAfterMs;
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    expect(server.counters.executions).toBe(0);
  });
});
