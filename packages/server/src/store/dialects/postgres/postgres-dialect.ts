import type { Kysely } from 'kysely';
import type { PgPoolLike } from '../../pg-pool-like.js';
import { purgeBatchStatement } from '../../purge.js';
import { migrationStatements } from '../../schema.js';
import { Statements } from '../../statements.js';
import { Store } from '../../store.js';
import type { TableName } from '../../table-name.js';
import type { StoreDialect } from '../dialect.js';

/** Postgres (pg with or without the `pool` fast path, PGlite): SQL text with embedded literals. */
export function createPostgresDialect(db: Kysely<any>, table: TableName, pool: PgPoolLike | undefined): StoreDialect {
  const store = new Store(db, pool, table);
  return {
    name: 'postgres',
    store,
    sql: new Statements(table),
    async migrate() {
      const { session } = await store.begin(migrationStatements(table));
      await session.commit([]);
    },
    purgeBatch: (batchSize) => store.affected(purgeBatchStatement(table, batchSize)),
  };
}
