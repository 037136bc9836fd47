import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LibsqlDialect } from '@libsql/kysely-libsql';
import Database from 'better-sqlite3';
import { Kysely, type KyselyConfig, SqliteDialect } from 'kysely';

/** A SQLite file of its own for one test file (WAL, so processes and connections can share it). */
export interface SqliteFile {
  /** Path of the database file. */
  path: string;
  /**
   * Opens a Kysely on the file through better-sqlite3 (`SqliteDialect`); destroyed by `drop()`. `log`: Kysely's, to
   * watch this connection's statements (another connection cannot see it wait for the write lock).
   */
  betterSqlite(opts?: Pick<KyselyConfig, 'log'>): Kysely<any>;
  /** Opens a Kysely on the file through libSQL (`@libsql/kysely-libsql`); destroyed by `drop()`. `log` as above. */
  libsql(opts?: Pick<KyselyConfig, 'log'>): Kysely<any>;
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
    betterSqlite(opts = {}) {
      const k = new Kysely<any>({ ...opts, dialect: new SqliteDialect({ database: new Database(path) }) });
      opened.push(k);
      return k;
    },
    libsql(opts = {}) {
      const k = new Kysely<any>({ ...opts, dialect: new LibsqlDialect({ url: `file:${path}` }) });
      opened.push(k);
      return k;
    },
    async drop() {
      await Promise.allSettled(opened.map((k) => k.destroy()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
