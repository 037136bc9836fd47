import type { Kysely } from 'kysely';
import type { TableName } from '../../table-name.js';
import type { StoreDialect } from '../dialect.js';
import { MIGRATE_LOCK, mysqlMigrationStatements, mysqlPurgeBatchStatement } from './mysql-schema.js';
import { MysqlStatements } from './mysql-statements.js';
import { MysqlStore } from './mysql-store.js';

/** MySQL 8 / MariaDB. `flavour` skips the server detection (the tests run the MySQL 8 SQL on MariaDB with it). */
export function createMysqlDialect(db: Kysely<any>, table: TableName, flavour?: 'mysql' | 'mariadb'): StoreDialect {
  const store = new MysqlStore(db, flavour);
  return {
    name: 'mysql',
    store,
    sql: new MysqlStatements(table, store.server),
    async migrate() {
      const held = await store.hold();
      try {
        // DDL commits implicitly in MySQL: a named lock, not a transaction, keeps instances from racing.
        await held.query(`SELECT GET_LOCK(${MIGRATE_LOCK}, 60) AS locked`);
        try {
          for (const text of mysqlMigrationStatements(table)) await held.query(text);
        } finally {
          await held.query(`SELECT RELEASE_LOCK(${MIGRATE_LOCK}) AS released`);
        }
      } finally {
        await held.release();
      }
    },
    async purgeBatch(batchSize) {
      const held = await store.hold();
      try {
        return Number((await held.query(mysqlPurgeBatchStatement(table, batchSize))).numAffectedRows ?? 0);
      } finally {
        await held.release();
      }
    },
  };
}
