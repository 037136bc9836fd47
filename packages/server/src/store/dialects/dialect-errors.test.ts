import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { postgresErrors } from './postgres/postgres-errors.js';
import { sqliteErrors } from './sqlite/sqlite-errors.js';

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

describe('telling an unreachable database from a failing statement (real errors)', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase(inject('pgAdminUrl'));
  });
  afterAll(() => tdb?.drop());

  it('calls a refused connection unavailable', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
    expect(postgresErrors.isUnavailable(await errorOf(pool.query('select 1')))).toBe(true);
    await pool.end();
  });

  it('calls an exhausted pool (no connection within its timeout) unavailable', async () => {
    // The first connection may take far longer than 50 ms on a loaded machine: only the second one must time out.
    const pool = new pg.Pool({ connectionString: tdb.url, max: 1, connectionTimeoutMillis: 30_000 });
    const held = await pool.connect();
    pool.options.connectionTimeoutMillis = 50;
    expect(postgresErrors.isUnavailable(await errorOf(pool.connect()))).toBe(true);
    held.release();
    await pool.end();
  });

  it('calls a terminated backend unavailable', async () => {
    const client = new pg.Client({ connectionString: tdb.url });
    client.on('error', () => {});
    await client.connect();
    const pid = (await client.query('select pg_backend_pid() as pid')).rows[0].pid;
    const failing = errorOf(client.query('select pg_sleep(5)'));
    await tdb.pool.query('select pg_terminate_backend($1)', [pid]);
    expect(postgresErrors.isUnavailable(await failing)).toBe(true);
    await client.end().catch(() => {});
  });

  it('does not call SQL errors unavailable, and names lock timeouts and missing tables', async () => {
    const syntax = await errorOf(tdb.pool.query('selec 1'));
    expect(postgresErrors.isUnavailable(syntax)).toBe(false);
    const missing = await errorOf(tdb.pool.query('select * from no_such_table'));
    expect([postgresErrors.isUnavailable(missing), postgresErrors.isUndefinedTable(missing)]).toEqual([false, true]);
    await tdb.pool.query('create table locked (id int primary key)');
    const a = await tdb.pool.connect();
    const b = await tdb.pool.connect();
    try {
      await a.query('begin');
      await a.query('insert into locked values (1)');
      await b.query('begin');
      await b.query("set local lock_timeout = '20ms'");
      const timeout = await errorOf(b.query('insert into locked values (1) on conflict do nothing'));
      expect([postgresErrors.isUnavailable(timeout), postgresErrors.isLockTimeout(timeout)]).toEqual([false, true]);
    } finally {
      await b.query('rollback');
      await a.query('rollback');
      a.release();
      b.release();
    }
  });
});

describe('telling a SQLite file that cannot be opened from a failing statement (real better-sqlite3 errors)', () => {
  const opening = (path: string) => {
    try {
      new Database(path).close();
    } catch (error) {
      return error;
    }
    throw new Error(`expected ${path} not to open`);
  };

  it('calls a file in a missing directory, or a path that is no file, unavailable (a volume gone)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'store-errors-'));
    try {
      expect(sqliteErrors.isUnavailable(opening(join(dir, 'missing', 'x.db')))).toBe(true);
      expect(sqliteErrors.isUnavailable(opening(dir))).toBe(true);
      const db = new Database(join(dir, 'ok.db'));
      const syntax = (() => {
        try {
          db.exec('selec 1');
        } catch (error) {
          return error;
        }
      })();
      expect(sqliteErrors.isUnavailable(syntax)).toBe(false);
      db.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
