import { createMariaDbDatabase, createSqliteFile } from '@trpc-idempotency/test-db';
import { type Kysely, type Logger, sql } from 'kysely';
import type { Pool } from 'pg';
import { MysqlStatements } from '../store/dialects/mysql/mysql-statements.js';
import { parseTableName } from '../store/table-name.js';
import { type AppDB, type Backend, killLeaseHolders, openBackend, PG_POOL_SIZE } from './harness.js';

/** The pool of each MariaDB Kysely (test-db's default). */
const MARIADB_POOL_SIZE = 10;

/** The core suite runs on every dialect: Postgres three ways, MariaDB, SQLite through better-sqlite3 and libSQL. */
export const DIALECT_BACKENDS = ['pg-fast', 'pg-general', 'pglite', 'mariadb', 'sqlite', 'libsql'] as const;
export type DialectBackendName = (typeof DIALECT_BACKENDS)[number];

/** A backend plus the dialect's SQL for what the tests write by hand. */
export interface DialectBackend extends Omit<Backend, 'name' | 'newPool' | 'url' | 'another'> {
  name: DialectBackendName;
  /**
   * Another "server instance" on the same database. `log`: its Kysely's log, to watch what that instance does
   * (on SQLite, to see it wait for the write lock, which no other connection can). The pg fast path's own statements
   * go through `pool`, not Kysely. `max`: its pool's connections (pg, MariaDB).
   */
  another(opts?: { max?: number; log?: Logger }): { db: Kysely<AppDB>; pool: Pool | undefined };
  dialect: 'postgres' | 'mysql' | 'sqlite';
  /** An expression for the database clock `offsetMs` from now, in the table's time type. */
  at(offsetMs: number): string;
  /** A string literal. */
  text(value: string): string;
  /** The `key` column as this dialect's SQL spells it (a reserved word in MySQL). */
  keyColumn: string;
  /** Connections one instance's pool holds: one more call than this, one after another, proves none leaked. */
  connections: number;
  /**
   * Connections of this database holding a transaction open with nothing running (a leaked claim or handler
   * transaction). SQLite shows no other connection's transaction: 1 when its write lock is held, else 0.
   */
  idleInTransaction(): Promise<number>;
  /**
   * Connections waiting for a row lock (a duplicate blocked on a claim), or `undefined` where the database cannot
   * tell (SQLite: a waiter polls its busy handler, invisible to others; PGlite: one connection).
   */
  lockWaiters(): Promise<number | undefined>;
  /**
   * The connection holding the lease of `key` in `scope` (table idempotency_keys) dies, as when its server crashes:
   * what proved the holder alive goes with it. Postgres and MariaDB only: PGlite is one connection, and a SQLite
   * holder's transaction holds the write lock (README "Dialects", "lease liveness" row).
   */
  killLeaseHolder(scope: string, key: string): Promise<void>;
}

/** Where a holder cannot die alone (see `killLeaseHolder`). */
function cannotKill(name: DialectBackendName) {
  return async () => {
    throw new Error(`${name}: a lease holder cannot die alone, its process holds the database`);
  };
}

/**
 * A new SQLite file (WAL) with the app's payments table, and `open` for another connection to it through the given
 * driver: each connection is another "server instance" (a process, as far as SQLite's locks go).
 */
export type SqlitePayments = Awaited<ReturnType<typeof createSqlitePayments>>;

export async function createSqlitePayments(name: 'sqlite' | 'libsql') {
  const file = await createSqliteFile();
  const open = (log?: Logger) =>
    (name === 'sqlite' ? file.betterSqlite({ log }) : file.libsql({ log })) as Kysely<AppDB>;
  // Closed after: the tests open their own connections.
  const setup = open();
  try {
    await sql`CREATE TABLE payments (
      id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, amount INTEGER NOT NULL, note TEXT
    )`.execute(setup);
  } finally {
    await setup.destroy();
  }
  return { file, open };
}

export async function openDialectBackend(name: DialectBackendName): Promise<DialectBackend> {
  if (name === 'pg-fast' || name === 'pg-general' || name === 'pglite') {
    const pg = await openBackend(name);
    return {
      ...pg,
      name,
      dialect: 'postgres',
      at: (ms) => `clock_timestamp() + ${ms} * interval '1 millisecond'`,
      text: (v) => `'${v.replaceAll("'", "''")}'`,
      keyColumn: 'key',
      connections: name === 'pglite' ? 1 : PG_POOL_SIZE,
      idleInTransaction: async () =>
        name === 'pglite'
          ? 0
          : Number(
              (
                await pg.query<{ n: string }>(
                  `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()
                    AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`,
                )
              )[0]?.n,
            ),
      lockWaiters: async () =>
        name === 'pglite'
          ? undefined
          : Number(
              (
                await pg.query<{ n: string }>(
                  `SELECT count(*) AS n FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock'`,
                )
              )[0]?.n,
            ),
      // Terminates every session holding an advisory lock in this database: the test's one holder.
      killLeaseHolder:
        name === 'pglite'
          ? cannotKill(name)
          : async () => {
              const killed = await killLeaseHolders(pg);
              if (killed !== 1) throw new Error(`expected one lease holder to kill, found ${killed}`);
            },
    };
  }
  if (name === 'mariadb') {
    const m = await createMariaDbDatabase({ max: MARIADB_POOL_SIZE });
    await sql`CREATE TABLE payments (
      id INT AUTO_INCREMENT PRIMARY KEY, user_id VARCHAR(255) NOT NULL, amount INT NOT NULL, note TEXT
    )`.execute(m.db);
    return {
      name,
      dialect: 'mysql',
      db: m.db as Kysely<AppDB>,
      pool: undefined,
      another: (opts) => ({ db: m.connect(opts) as Kysely<AppDB>, pool: undefined }),
      query: async (text) => (await sql.raw(text).execute(m.db)).rows as never,
      close: () => m.drop(),
      at: (ms) => `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 + ${ms})`,
      text: (v) => `'${v.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`,
      keyColumn: '`key`',
      connections: MARIADB_POOL_SIZE,
      // InnoDB's open transactions whose session sits idle ('Sleep'): nothing will ever commit them.
      idleInTransaction: () => countInnodbTransactions(m.db, (trx) => trx.command === 'Sleep'),
      lockWaiters: () => countInnodbTransactions(m.db, (trx) => trx.lockWait),
      // The key's named lock (GET_LOCK) is held by the holder's connection: KILL that connection.
      killLeaseHolder: async (scope, key) => {
        const lock = new MysqlStatements(parseTableName('idempotency_keys'), { mariadb: true }).leaseLockName({
          scope,
          key,
        });
        const id = (await sql.raw<{ id: unknown }>(`SELECT IS_USED_LOCK(${lock}) AS id`).execute(m.db)).rows[0]?.id;
        if (id == null) throw new Error(`no connection holds the lease lock of ${key}`);
        await sql.raw(`KILL ${Number(id)}`).execute(m.db);
      },
    };
  }
  const { file, open } = await createSqlitePayments(name);
  const db = open();
  return {
    name,
    dialect: 'sqlite',
    db,
    pool: undefined,
    // Another connection to the same file: another "server instance" (a process, as far as SQLite's locks go).
    another: (opts) => ({ db: open(opts?.log), pool: undefined }),
    query: async (text) => (await sql.raw(text).execute(db)).rows as never,
    close: () => file.drop(),
    at: (ms) => `(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ${ms})`,
    text: (v) => `'${v.replaceAll("'", "''")}'`,
    keyColumn: 'key',
    // Kysely's SQLite driver lends its one connection to one caller at a time: the calls of an instance queue.
    connections: 1,
    // A leaked transaction holds the write lock: take it on a connection of our own (busy_timeout 0) and let go.
    idleInTransaction: async () => {
      const probe = open();
      try {
        await probe.connection().execute(async (c) => {
          await sql`PRAGMA busy_timeout = 0`.execute(c);
          await sql`BEGIN IMMEDIATE`.execute(c);
          await sql`ROLLBACK`.execute(c);
        });
        return 0;
      } catch {
        return 1;
      } finally {
        await probe.destroy();
      }
    },
    lockWaiters: async () => undefined,
    killLeaseHolder: cannotKill(name),
  };
}

/** A key row written by hand (a dead holder's claim, an expired result); times in ms from now by the database clock. */
export interface KeyRow {
  scope: string;
  key: string;
  fingerprint?: string;
  path?: string;
  status: 'in_progress' | 'done';
  token?: string;
  response?: string;
  lockedInMs?: number;
  expiresInMs: number;
}

/** Inserts `rows` into the key table `table` in one statement, in the dialect's SQL. */
export async function insertKeyRows(backend: DialectBackend, rows: readonly KeyRow[], table = 'idempotency_keys') {
  const { text, at } = backend;
  const orNull = <T>(value: T | undefined, sql: (v: T) => string) => (value === undefined ? 'NULL' : sql(value));
  const values = rows.map(
    (r) => `(${text(r.scope)}, ${text(r.key)}, ${text(r.fingerprint ?? 'f')}, ${text(r.path ?? 'payments.create')},
      ${text(r.status)}, ${orNull(r.token, text)}, ${orNull(r.lockedInMs, at)}, ${orNull(r.response, text)}, ${at(0)},
      ${at(r.expiresInMs)})`,
  );
  await backend.query(`INSERT INTO ${table} (scope, ${backend.keyColumn}, fingerprint, path, status, token,
    locked_until,
    response, created_at, expires_at) VALUES ${values.join(',\n')}`);
}

/** A text column's value as a string: MySQL hands its binary columns back as bytes. */
export function columnText(value: unknown): unknown {
  return value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : value;
}

/**
 * Counts the open InnoDB transactions of this database's other connections that `match`. Read from SHOW ENGINE
 * INNODB STATUS, which lists them as they are: information_schema.innodb_trx is a copy InnoDB refreshes only once
 * nobody has read it for 100 ms, so a test polling it every 50 ms (expect.poll) keeps reading a stale list — seen
 * here: a committed transaction still listed after ten reads 50 ms apart, gone after a 200 ms pause.
 */
async function countInnodbTransactions(
  db: Kysely<any>,
  match: (trx: { command: string; lockWait: boolean }) => boolean,
): Promise<number> {
  return db.connection().execute(async (c) => {
    const { rows: sessions } = await sql<{ ID: unknown; COMMAND: string }>`SELECT ID, COMMAND
      FROM information_schema.processlist WHERE DB = database() AND ID <> connection_id()`.execute(c);
    const commandOf = new Map(sessions.map((s) => [Number(s.ID), s.COMMAND]));
    const { rows } = await sql<{ Status: string }>`SHOW ENGINE INNODB STATUS`.execute(c);
    let count = 0;
    // Each "---TRANSACTION <id>, ACTIVE …" block names its session ("MariaDB thread id N"; MySQL: "MySQL thread
    // id N") and, while it waits for a lock, says "LOCK WAIT". Sessions without a transaction are "not started".
    for (const block of String(rows[0]?.Status ?? '')
      .split('\n---TRANSACTION ')
      .slice(1)) {
      if (!/^\S+, ACTIVE/.test(block)) continue;
      const command = commandOf.get(Number(/ thread id (\d+)/.exec(block)?.[1]));
      if (command !== undefined && match({ command, lockWait: /\nLOCK WAIT /.test(block) })) count++;
    }
    return count;
  });
}
