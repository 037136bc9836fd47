import type { Kysely } from 'kysely';
import type { TableName } from '../table-name.js';
import { detectDialect } from './detect-dialect.js';
import type { DialectName, StoreDialect } from './dialect.js';
import { createMysqlDialect } from './mysql/mysql-dialect.js';
import { createPostgresDialect } from './postgres/postgres-dialect.js';
import type { PostgresOptions } from './postgres/postgres-options.js';
import { createSqliteDialect } from './sqlite/sqlite-dialect.js';

export interface StoreDialectOptions {
  dialect: DialectName | undefined;
  table: TableName;
  postgres: PostgresOptions;
  wait: number;
}

/** The store, statements, DDL and purge for `db`'s dialect. */
export function createStoreDialect(db: Kysely<any>, options: StoreDialectOptions): StoreDialect {
  const name = detectDialect(db, options.dialect);
  if (name !== 'postgres' && options.postgres.pool !== undefined) {
    throw new TypeError(
      `createIdempotency: \`postgres.pool\` (or \`pool\`) is the pg fast path; it does not apply to ${name}`,
    );
  }
  if (name === 'mysql') return createMysqlDialect(db, options.table);
  if (name === 'sqlite') return createSqliteDialect(db, options.table, options.wait);
  return createPostgresDialect(db, options.table, options.postgres);
}
