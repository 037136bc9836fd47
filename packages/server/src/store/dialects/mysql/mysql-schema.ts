import { int } from '../../sql-int.js';
import type { TableName } from '../../table-name.js';
import { MAX_SCOPE_BYTES } from '../dialect.js';
import { NOW_MS } from './mysql-statements.js';

/** A named lock every instance takes around its DDL (GET_LOCK is per connection and outlives no session). */
export const MIGRATE_LOCK = "'trpc_idempotency_migrate'";

function quoted(table: TableName): { t: string; schema: string | undefined } {
  const { schema, name } = table.parts;
  return { t: schema ? `\`${schema}\`.\`${name}\`` : `\`${name}\``, schema: schema && `\`${schema}\`` };
}

/**
 * The DDL `migrate()` runs, between GET_LOCK and RELEASE_LOCK on one connection. Keys and scopes are VARBINARY, so
 * they compare byte-exact (no case folding, no PAD SPACE: `abc` ≠ `ABC`, `k` ≠ `k `); the response is a LONGBLOB
 * of UTF-8, stored and read back byte for byte. Times are epoch milliseconds. The expiry index is declared inside
 * CREATE TABLE because MySQL 8 has no CREATE INDEX IF NOT EXISTS.
 */
export function mysqlMigrationStatements(table: TableName): string[] {
  const { t, schema } = quoted(table);
  return [
    ...(schema ? [`CREATE DATABASE IF NOT EXISTS ${schema}`] : []),
    `CREATE TABLE IF NOT EXISTS ${t} (
  scope VARBINARY(${MAX_SCOPE_BYTES}) NOT NULL,
  \`key\` VARBINARY(255) NOT NULL,
  fingerprint BLOB NOT NULL,
  path BLOB NOT NULL,
  status VARBINARY(16) NOT NULL CHECK (status IN ('in_progress', 'done')),
  token BLOB NULL,
  locked_until BIGINT NULL,
  response LONGBLOB NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (scope, \`key\`),
  KEY \`${table.parts.index}\` (expires_at)
) ENGINE = InnoDB`,
  ];
}

/**
 * One bounded purge batch. MySQL has no SKIP LOCKED for DELETE: concurrent purges wait on each other's rows for a
 * moment instead, and never delete a row twice (a deleted row is gone for the waiter). Waiting, they can deadlock:
 * the victim's batch runs again (createMysqlDialect's purgeBatch).
 */
export function mysqlPurgeBatchStatement(table: TableName, batchSize: number): string {
  const { t } = quoted(table);
  return `DELETE FROM ${t}
WHERE expires_at <= ${NOW_MS} AND NOT (status = 'in_progress' AND locked_until > ${NOW_MS})
ORDER BY expires_at LIMIT ${int(batchSize)}`;
}
