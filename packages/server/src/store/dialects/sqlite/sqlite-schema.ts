import { int } from '../../sql-int.js';
import type { TableName } from '../../table-name.js';
import { NOW_MS, sqliteTable } from './sqlite-statements.js';

/**
 * The DDL `migrate()` runs inside one BEGIN IMMEDIATE transaction, so instances that start at once take turns.
 * TEXT columns compare with the BINARY collation (byte-exact); times are epoch milliseconds.
 */
export function sqliteMigrationStatements(table: TableName): string[] {
  const { schema } = table.parts;
  const index = schema ? `"${schema}"."${table.parts.index}"` : `"${table.parts.index}"`;
  return [
    `CREATE TABLE IF NOT EXISTS ${sqliteTable(table)} (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  path TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('in_progress', 'done')),
  token TEXT,
  locked_until INTEGER,
  response TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
)`,
    `CREATE INDEX IF NOT EXISTS ${index} ON "${table.parts.name}" (expires_at)`,
  ];
}

/** One bounded purge batch (DELETE … LIMIT is a compile-time option of SQLite: select the rowids instead). */
export function sqlitePurgeBatchStatement(table: TableName, batchSize: number): string {
  const t = sqliteTable(table);
  return `DELETE FROM ${t} WHERE rowid IN (SELECT rowid FROM ${t}
  WHERE expires_at <= ${NOW_MS} AND NOT (status = 'in_progress' AND locked_until > ${NOW_MS})
  LIMIT ${int(batchSize)})`;
}
