import type { Kysely } from 'kysely';
import type { TableName } from '../../table-name.js';
import type { StoreDialect } from '../dialect.js';
import { postgresErrors } from './postgres-errors.js';
import type { PostgresOptions } from './postgres-options.js';
import { PreparedStatements } from './postgres-prepared-statements.js';
import { migrationStatements, purgeBatchStatement } from './postgres-schema.js';
import { PostgresStatements } from './postgres-statements.js';
import { addStepsColumn, PostgresStepStatements } from './postgres-step-statements.js';
import { PostgresStore } from './postgres-store.js';

/** Postgres (pg with or without the `pool` fast path, PGlite): SQL text with embedded literals. */
export function createPostgresDialect(db: Kysely<any>, table: TableName, { pool }: PostgresOptions): StoreDialect {
  // Prepared once per connection where the store holds its connections (see postgres-prepared-statements.ts and
  // PostgresStore).
  const prepared = new PreparedStatements();
  const store = new PostgresStore(db, pool, table, prepared);
  return {
    name: 'postgres',
    store,
    sql: new PostgresStatements(table, prepared, pool !== undefined),
    stepSql: new PostgresStepStatements(table),
    errors: postgresErrors,
    async migrate() {
      const { session } = await store.begin([...migrationStatements(table), addStepsColumn(table)]);
      await session.commit([]);
    },
    purgeBatch: (batchSize) => store.affected(purgeBatchStatement(table, batchSize)),
  };
}
