import { randomUUID } from 'node:crypto';
import { TRPCError } from '@trpc/server';
import {
  createMariaDbDatabase,
  createSqliteFile,
  createTestDatabase,
  type MariaDbDatabase,
  type SqliteFile,
  type TestDatabase,
} from '@trpc-idempotency/test-db';
import { CompiledQuery, Kysely, MysqlDialect, PostgresDialect, sql } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { type Ctx, deferred, t, until } from './harness.js';

/** The app's statement timeout (Postgres statement_timeout, MariaDB max_statement_time, SQLite busy_timeout). */
const APP_TIMEOUT_MS = 300;
/** `wait`, well above the app's timeout. MariaDB bounds a lock wait in whole seconds: a whole number of them. */
const WAIT_MS = 2000;

const BACKENDS = ['pg-fast', 'pg-general', 'mariadb', 'sqlite', 'libsql'] as const;
type Name = (typeof BACKENDS)[number];

/** One database, and `open` for another "server instance" on it whose sessions have the app's timeout. */
interface Database {
  /** A Kysely (and the `pool` fast path on pg-fast) whose every connection runs with `timeoutMs`. */
  open(timeoutMs: number): { db: Kysely<any>; pool?: pg.Pool };
  /** A statement that keeps the database busy `ms` (the handler's own slow statement). */
  sleep(ms: number): string;
  /** Cancels the statements waiting for a row lock, as an operator would (pg_cancel_backend, KILL QUERY). */
  cancelWaiters(): Promise<number>;
  close(): Promise<void>;
}

async function openDatabase(name: Name): Promise<Database> {
  if (name === 'pg-fast' || name === 'pg-general') {
    const tdb: TestDatabase = await createTestDatabase(inject('pgAdminUrl'));
    const pools: pg.Pool[] = [];
    const dbs: Kysely<any>[] = [];
    return {
      open(timeoutMs) {
        // As an app sets it: a startup option of every connection of its pool.
        const pool = new pg.Pool({ connectionString: tdb.url, max: 4, options: `-c statement_timeout=${timeoutMs}` });
        pool.on('error', () => {});
        pools.push(pool);
        const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
        dbs.push(db);
        return name === 'pg-fast' ? { db, pool } : { db };
      },
      sleep: (ms) => `SELECT pg_sleep(${ms / 1000})`,
      cancelWaiters: async () =>
        (
          await tdb.pool.query(
            `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        ).rowCount ?? 0,
      async close() {
        await Promise.allSettled(dbs.map((d) => d.destroy()));
        await tdb.drop();
      },
    };
  }
  if (name === 'mariadb') {
    const m: MariaDbDatabase = await createMariaDbDatabase({ max: 2 });
    const dbs: Kysely<any>[] = [];
    return {
      open(timeoutMs) {
        const pool = createPool({ uri: m.url, connectionLimit: 4 });
        pool.on('connection', (c) => c.on('error', () => {}));
        // As an app sets it: on every new connection of its pool.
        const db = new Kysely<any>({
          dialect: new MysqlDialect({
            pool,
            onCreateConnection: async (c) => {
              await c.executeQuery(CompiledQuery.raw(`SET SESSION max_statement_time = ${timeoutMs / 1000}`));
            },
          }),
        });
        dbs.push(db);
        return { db };
      },
      sleep: (ms) => `SELECT SLEEP(${ms / 1000}) AS slept`,
      async cancelWaiters() {
        const waiting = await sql<{
          id: number;
        }>`SELECT trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`.execute(
          m.db,
        );
        for (const { id } of waiting.rows) await sql.raw(`KILL QUERY ${Number(id)}`).execute(m.db);
        return waiting.rows.length;
      },
      async close() {
        await Promise.allSettled(dbs.map((d) => d.destroy()));
        await m.drop();
      },
    };
  }
  const file: SqliteFile = await createSqliteFile();
  return {
    open(timeoutMs) {
      const db = name === 'sqlite' ? file.betterSqlite() : file.libsql();
      // Kysely's SQLite drivers hold one connection: the pragma stays on it.
      void sql.raw(`PRAGMA busy_timeout = ${timeoutMs}`).execute(db);
      return { db };
    },
    sleep: () => 'SELECT 1',
    cancelWaiters: async () => 0,
    close: () => file.drop(),
  };
}

/** An app on `db` whose handler waits at `gate` (when set) and may run `statement` on its transaction first. */
function makeApp(conn: { db: Kysely<any>; pool?: pg.Pool }, mode: 'transaction' | 'lease' = 'transaction') {
  const control = {
    runs: 0,
    gate: undefined as Promise<void> | undefined,
    atGate: 0,
    statement: undefined as string | undefined,
  };
  const idempotency = createIdempotency({
    db: conn.db,
    pool: conn.pool,
    wait: WAIT_MS,
    mode,
    scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}`,
  });
  const router = t.router({
    pay: t.procedure.use(idempotency.middleware).mutation(async ({ ctx }) => {
      control.runs++;
      if (control.statement) await sql.raw(control.statement).execute(ctx.idempotency.db);
      control.atGate++;
      if (control.gate) await control.gate;
      return { execution: randomUUID() };
    }),
  });
  const call = (key: string) => {
    const resHeaders = new Headers();
    const ctx = { userId: 'u1', headers: { 'idempotency-key': key }, resHeaders } as Ctx;
    return { resHeaders, result: router.createCaller(ctx).pay() };
  };
  return { idempotency, control, call };
}

/** Runs `promise` and tells how long it took to settle, and with what. */
async function timed<T>(promise: Promise<T>) {
  const startedAt = performance.now();
  try {
    return { value: await promise, error: undefined, ms: performance.now() - startedAt };
  } catch (error) {
    return { value: undefined, error, ms: performance.now() - startedAt };
  }
}

/**
 * The server README advises a statement timeout, and an app may set one below `wait`. A duplicate that waits for a
 * running claim (transaction mode) must be bounded by `wait` alone: 409 `in_progress` with Retry-After after `wait`,
 * never the app's timeout's 500, and the original then completes and is replayed. A handler's own statement stays
 * under the app's timeout.
 */
describe.each(BACKENDS)("the app's statement timeout on %s", (name) => {
  let database: Database;
  beforeAll(async () => {
    database = await openDatabase(name);
    await makeApp(database.open(APP_TIMEOUT_MS)).idempotency.migrate();
  });
  afterAll(() => database?.close());

  /**
   * An original that holds `key`'s claim at its gate, on one instance, while `duplicate` (another instance: on SQLite
   * another connection, a process as far as its locks go) sends the same key; `during` sees the duplicate's call.
   * Returns the original's result once its gate opened, and both instances' runs.
   */
  async function whileHeld(
    timeoutMs: number,
    during: (second: ReturnType<ReturnType<typeof makeApp>['call']>) => Promise<void>,
    mode: 'transaction' | 'lease' = 'transaction',
  ) {
    const original = makeApp(database.open(timeoutMs), mode);
    const duplicate = makeApp(database.open(timeoutMs), mode);
    const gate = deferred();
    original.control.gate = gate.promise;
    const key = `st-${randomUUID()}`;
    const first = original.call(key);
    first.result.catch(() => {});
    try {
      await until(() => original.control.atGate === 1);
      await during(duplicate.call(key));
    } finally {
      gate.resolve();
    }
    const done = await first.result;
    return { key, done, duplicate, runs: () => original.control.runs + duplicate.control.runs };
  }

  it.each([
    ['below', APP_TIMEOUT_MS, 'transaction'],
    ['above', 10 * WAIT_MS, 'transaction'],
    ['below', APP_TIMEOUT_MS, 'lease'],
  ] as const)(
    'a timeout %s `wait` (%i ms), %s mode: a duplicate waits `wait`, then 409 in_progress with Retry-After; ' +
      'the original is replayed',
    async (_, timeoutMs, mode) => {
      const { key, done, duplicate, runs } = await whileHeld(
        timeoutMs,
        async (second) => {
          const { error, ms } = await timed(second.result);
          expect(error).toBeInstanceOf(TRPCError);
          expect((error as TRPCError).code).toBe('CONFLICT');
          expect((error as TRPCError).message).toMatch(/still in progress/);
          expect(second.resHeaders.get('retry-after')).toBe('1');
          // After `wait`, not the app's timeout; MariaDB rounds the lock wait up to whole seconds (here: 2 s).
          expect(ms).toBeGreaterThan(WAIT_MS - 100);
          expect(ms).toBeLessThan(WAIT_MS + 1500);
        },
        mode,
      );
      expect(await duplicate.call(key).result).toEqual(done);
      expect(runs()).toBe(1);
    },
    15_000,
  );

  it.skipIf(name === 'sqlite' || name === 'libsql')(
    'a waiting claim cancelled by the database answers 409 in_progress with Retry-After, not 500',
    async () => {
      const { runs } = await whileHeld(APP_TIMEOUT_MS, async (second) => {
        second.result.catch(() => {});
        await new Promise((r) => setTimeout(r, WAIT_MS / 4));
        expect(await database.cancelWaiters()).toBe(1);
        const { error, ms } = await timed(second.result);
        expect((error as TRPCError | undefined)?.code).toBe('CONFLICT');
        expect(second.resHeaders.get('retry-after')).toBe('1');
        expect(ms).toBeLessThan(WAIT_MS);
      });
      expect(runs()).toBe(1);
    },
    15_000,
  );

  it.skipIf(name === 'sqlite' || name === 'libsql')(
    "a handler's own statement past the app's timeout still fails (500) and frees the key",
    async () => {
      const app = makeApp(database.open(APP_TIMEOUT_MS));
      app.control.statement = database.sleep(APP_TIMEOUT_MS * 4);
      const key = `st-${randomUUID()}`;
      const { error, ms } = await timed(app.call(key).result);
      expect((error as TRPCError | undefined)?.code).toBe('INTERNAL_SERVER_ERROR');
      expect(ms).toBeLessThan(APP_TIMEOUT_MS * 4);
      // Released: the retry runs again, and succeeds without the slow statement.
      app.control.statement = undefined;
      await app.call(key).result;
      expect(app.control.runs).toBe(2);
    },
    15_000,
  );
});
