import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LibsqlDialect } from '@libsql/kysely-libsql';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';

/** A SQLite file of its own for one test file (WAL, so processes and connections can share it). */
export interface SqliteFile {
  /** Path of the database file. */
  path: string;
  /** Opens a Kysely on the file through better-sqlite3 (`SqliteDialect`); destroyed by `drop()`. */
  betterSqlite(): Kysely<any>;
  /** Opens a Kysely on the file through libSQL (`@libsql/kysely-libsql`); destroyed by `drop()`. */
  libsql(): Kysely<any>;
  /** Closes every connection and deletes the file. */
  drop(): Promise<void>;
}

export async function createSqliteFile(): Promise<SqliteFile> {
  const dir = await mkdtemp(join(tmpdir(), 'trpc-idem-sqlite-'));
  const path = join(dir, 'test.db');
  const setup = new Database(path);
  setup.pragma('journal_mode = WAL');
  setup.close();
  const opened: Kysely<any>[] = [];
  return {
    path,
    betterSqlite() {
      const k = new Kysely<any>({ dialect: new SqliteDialect({ database: new Database(path) }) });
      opened.push(k);
      return k;
    },
    libsql() {
      const k = new Kysely<any>({ dialect: new LibsqlDialect({ url: `file:${path}` }) });
      opened.push(k);
      return k;
    },
    async drop() {
      await Promise.allSettled(opened.map((k) => k.destroy()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
