import type { Kysely } from 'kysely';
import type { TableName } from '../../table-name.js';
import type { StoreDialect } from '../dialect.js';
import { sqliteErrors } from './sqlite-errors.js';
import { sqliteMigrationStatements, sqlitePurgeBatchStatement } from './sqlite-schema.js';
import { SqliteStatements } from './sqlite-statements.js';
import { addSqliteStepsColumn, SqliteStepStatements } from './sqlite-step-statements.js';
import { SqliteStore } from './sqlite-store.js';

/** SQLite (better-sqlite3, libSQL on a local file). `waitMs` bounds every wait for another process's write lock. */
export function createSqliteDialect(db: Kysely<any>, table: TableName, waitMs: number): StoreDialect {
  const store = new SqliteStore(db, waitMs);
  return {
    name: 'sqlite',
    store,
    sql: new SqliteStatements(table),
    stepSql: new SqliteStepStatements(table),
    errors: sqliteErrors,
    async migrate() {
      await store.write(sqliteMigrationStatements(table));
      await addSqliteStepsColumn(store, table);
    },
    purgeBatch: (batchSize) => store.write([sqlitePurgeBatchStatement(table, batchSize)]),
  };
}
