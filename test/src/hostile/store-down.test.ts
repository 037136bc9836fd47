import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type BackendName } from '../harness/backends.ts';
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

/** A Kysely (and on `pg-pool` its raw pool) whose database cannot be reached, on each backend. */
async function unreachable(backend: BackendName): Promise<{ db: Kysely<any>; pool?: pg.Pool }> {
  if (backend === 'pg-pool' || backend === 'pg-kysely') {
    const pool = new pg.Pool({
      connectionString: `postgres://postgres@127.0.0.1:${await closedPort()}/none`,
      connectionTimeoutMillis: 1_000,
    });
    pool.on('error', () => {});
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    return backend === 'pg-pool' ? { db, pool } : { db };
  }
  if (backend === 'mariadb') {
    const pool = createPool({ uri: `mysql://root@127.0.0.1:${await closedPort()}/none`, connectTimeout: 1_000 });
    return { db: new Kysely<any>({ dialect: new MysqlDialect({ pool }) }) };
  }
  // A file in a directory that does not exist (a volume gone): better-sqlite3 opens it lazily, at the first query.
  const missing = join(tmpdir(), `trpc-idem-missing-${randomUUID()}`, 'down.db');
  return { db: new Kysely<any>({ dialect: new SqliteDialect({ database: async () => new Database(missing) }) }) };
}

/**
 * PGlite runs inside the server process: there is no database to lose that would not take the server with it.
 * libSQL opens its file when the app builds its Kysely (`LibsqlDialect` creates the client in `createDriver`): a
 * file that cannot be opened fails the app's start, never a request, so there is no claim to answer 503.
 */
const DOWN_BACKENDS = BACKENDS.filter(
  (b): b is Exclude<BackendName, 'pglite' | 'libsql'> => b !== 'pglite' && b !== 'libsql',
);
it.skip('PGlite: the database runs in the server process, so it cannot be unreachable while the server runs', () => {});
it.skip('libSQL: a database file that cannot be opened fails new Kysely() at the app’s start, not a request', () => {});

describe.each(DOWN_BACKENDS)('the database is unreachable on %s', (backend) => {
  let db: Kysely<any>;
  const servers: Partial<Record<'transaction' | 'lease', Awaited<ReturnType<typeof startPaymentsServer>>>> = {};

  beforeAll(async () => {
    const via = await unreachable(backend);
    db = via.db;
    servers.transaction = await startPaymentsServer({ ...via, migrate: false });
    servers.lease = await startPaymentsServer({ ...via, mode: 'lease', migrate: false });
  });

  afterAll(async () => {
    await servers.transaction?.close();
    await servers.lease?.close();
    await db?.destroy().catch(() => {});
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
});
