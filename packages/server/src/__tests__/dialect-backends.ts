import { createMariaDbDatabase, createSqliteFile } from '@trpc-idempotency/test-db';
import { type Kysely, type Logger, sql } from 'kysely';
import type { Pool } from 'pg';
import { type AppDB, type Backend, openBackend } from './harness.js';

/** The core suite runs on every dialect: Postgres three ways, MariaDB, SQLite through better-sqlite3 and libSQL. */
export const DIALECT_BACKENDS = ['pg-fast', 'pg-general', 'pglite', 'mariadb', 'sqlite', 'libsql'] as const;
export type DialectBackendName = (typeof DIALECT_BACKENDS)[number];

/** A backend plus the dialect's SQL for what the tests write by hand. */
export interface DialectBackend extends Omit<Backend, 'name' | 'newPool' | 'url' | 'another'> {
  name: DialectBackendName;
  /**
   * Another "server instance" on the same database. `log`: its Kysely's log, to watch what that instance does
   * (on SQLite, to see it wait for the write lock, which no other connection can). The pg fast path's own statements
   * go through `pool`, not Kysely.
   */
  another(log?: Logger): { db: Kysely<AppDB>; pool: Pool | undefined };
  dialect: 'postgres' | 'mysql' | 'sqlite';
  /** An expression for the database clock `offsetMs` from now, in the table's time type. */
  at(offsetMs: number): string;
  /** A string literal. */
  text(value: string): string;
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
      idleInTransaction: async () =>
        name === 'pglite'
          ? 0
          : Number(
              (
                await pg.query<{ n: string }>(
                  `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`,
                )
              )[0]?.n,
            ),
      lockWaiters: async () =>
        name === 'pglite'
          ? undefined
          : Number(
              (
                await pg.query<{ n: string }>(
                  `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
                )
              )[0]?.n,
            ),
    };
  }
  if (name === 'mariadb') {
    const m = await createMariaDbDatabase();
    await sql`CREATE TABLE payments (id INT AUTO_INCREMENT PRIMARY KEY, user_id VARCHAR(255) NOT NULL, amount INT NOT NULL, note TEXT)`.execute(
      m.db,
    );
    return {
      name,
      dialect: 'mysql',
      db: m.db as Kysely<AppDB>,
      pool: undefined,
      another: (log) => ({ db: m.connect({ log }) as Kysely<AppDB>, pool: undefined }),
      query: async (text) => (await sql.raw(text).execute(m.db)).rows as never,
      close: () => m.drop(),
      at: (ms) => `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 + ${ms})`,
      text: (v) => `'${v.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`,
      // InnoDB's open transactions whose session sits idle ('Sleep'): nothing will ever commit them.
      idleInTransaction: () => countInnodbTransactions(m.db, (trx) => trx.command === 'Sleep'),
      lockWaiters: () => countInnodbTransactions(m.db, (trx) => trx.lockWait),
    };
  }
  const file = await createSqliteFile();
  const open = (log?: Logger) =>
    (name === 'sqlite' ? file.betterSqlite({ log }) : file.libsql({ log })) as Kysely<AppDB>;
  const db = open();
  await sql`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, amount INTEGER NOT NULL, note TEXT)`.execute(
    db,
  );
  return {
    name,
    dialect: 'sqlite',
    db,
    pool: undefined,
    // Another connection to the same file: another "server instance" (a process, as far as SQLite's locks go).
    another: (log) => ({ db: open(log), pool: undefined }),
    query: async (text) => (await sql.raw(text).execute(db)).rows as never,
    close: () => file.drop(),
    at: (ms) => `(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ${ms})`,
    text: (v) => `'${v.replaceAll("'", "''")}'`,
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
  };
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
