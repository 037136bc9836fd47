import { type Kysely, MysqlAdapter, SqliteAdapter } from 'kysely';

/** The SQL a Kysely speaks, learned from its adapter as the middleware learns it (libSQL's adapter is SQLite's). */
export type SqlFamily = 'postgres' | 'mysql' | 'sqlite';

export function sqlFamily(db: Kysely<any>): SqlFamily {
  const adapter = db.getExecutor().adapter;
  if (adapter instanceof MysqlAdapter) return 'mysql';
  if (adapter instanceof SqliteAdapter) return 'sqlite';
  return 'postgres';
}
