import type { Kysely } from 'kysely';
import type { PgPoolLike } from '../../pg-pool-like.js';
import { PreparedStatements } from '../../prepared-statements.js';
import { purgeBatchStatement } from '../../purge.js';
import { migrationStatements } from '../../schema.js';
import { Statements } from '../../statements.js';
import { addStepsColumn, PostgresStepStatements } from '../../step-statements.js';
import { Store } from '../../store.js';
import type { TableName } from '../../table-name.js';
import type { StoreDialect } from '../dialect.js';

/** Postgres (pg with or without the `pool` fast path, PGlite): SQL text with embedded literals. */
export function createPostgresDialect(db: Kysely<any>, table: TableName, pool: PgPoolLike | undefined): StoreDialect {
  // Prepared once per connection where the store holds its connections (see prepared-statements.ts and Store).
  const prepared = new PreparedStatements();
  const store = new Store(db, pool, table, prepared);
  return {
    name: 'postgres',
    store,
    sql: new Statements(table, prepared),
    steps: new PostgresStepStatements(table),
    async migrate() {
      const { session } = await store.begin([...migrationStatements(table), addStepsColumn(table)]);
      await session.commit([]);
    },
    purgeBatch: (batchSize) => store.affected(purgeBatchStatement(table, batchSize)),
  };
}
