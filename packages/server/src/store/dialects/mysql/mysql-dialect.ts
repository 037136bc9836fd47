import type { Kysely } from 'kysely';
import type { TableName } from '../../table-name.js';
import type { StoreDialect } from '../dialect.js';
import { isDeadlock, mysqlErrors } from './mysql-errors.js';
import { MIGRATE_LOCK, mysqlMigrationStatements, mysqlPurgeBatchStatement } from './mysql-schema.js';
import { MysqlStatements } from './mysql-statements.js';
import { addMysqlStepsColumn, MysqlStepStatements } from './mysql-step-statements.js';
import { MysqlStore } from './mysql-store.js';

/**
 * Concurrent purges lock the rows they scan in orders of their own (InnoDB's choice of index), so one may be chosen
 * as a deadlock victim: its DELETE rolled back whole, it runs again, this often before the error reaches the caller.
 */
const PURGE_DEADLOCK_TRIES = 10;

/** MySQL 8 / MariaDB. `variant` skips the server detection (the tests run the MySQL 8 SQL on MariaDB with it). */
export function createMysqlDialect(db: Kysely<any>, table: TableName, variant?: 'mysql' | 'mariadb'): StoreDialect {
  const store = new MysqlStore(db, variant);
  return {
    name: 'mysql',
    store,
    sql: new MysqlStatements(table, store.server),
    stepSql: new MysqlStepStatements(table),
    errors: mysqlErrors,
    async migrate() {
      const held = await store.hold();
      try {
        // DDL commits implicitly in MySQL: a named lock, not a transaction, keeps instances from racing.
        await held.query(`SELECT GET_LOCK(${MIGRATE_LOCK}, 60) AS locked`);
        try {
          for (const text of mysqlMigrationStatements(table)) await held.query(text);
          await addMysqlStepsColumn(held, table);
        } finally {
          await held.query(`SELECT RELEASE_LOCK(${MIGRATE_LOCK}) AS released`);
        }
      } finally {
        await held.release();
      }
    },
    async purgeBatch(batchSize) {
      for (let attempt = 1; ; attempt++) {
        const held = await store.hold();
        try {
          return Number((await held.query(mysqlPurgeBatchStatement(table, batchSize))).numAffectedRows ?? 0);
        } catch (error) {
          if (!isDeadlock(error) || attempt >= PURGE_DEADLOCK_TRIES) throw error;
        } finally {
          await held.release();
        }
      }
    },
  };
}
