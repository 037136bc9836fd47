import { plain } from '../../connection/step.js';
import type { TableName } from '../../table-name.js';
import type { LeaseOwner, Step, StepStatements } from '../dialect.js';
import { NOW_MS, sqliteTable } from './sqlite-statements.js';
import type { SqliteStore } from './sqlite-store.js';

/** Lease mode's durable steps on SQLite (see StepStatements in ../dialect.ts); values are bound parameters. */
export class SqliteStepStatements implements StepStatements {
  readonly #t: string;

  constructor(table: TableName) {
    this.#t = sqliteTable(table);
  }

  select(owner: LeaseOwner): Step {
    return plain(`SELECT steps FROM ${this.#t} WHERE ${OWNS}`, values(owner));
  }

  record(owner: LeaseOwner, steps: string): Step {
    return plain(`UPDATE ${this.#t} SET steps = ? WHERE ${OWNS} RETURNING 1 AS recorded`, [steps, ...values(owner)]);
  }

  lapse(owner: LeaseOwner): Step {
    return plain(`UPDATE ${this.#t} SET locked_until = ${NOW_MS} WHERE ${OWNS}`, values(owner));
  }
}

const OWNS = `scope = ? AND key = ? AND token = ? AND status = 'in_progress'`;

function values(o: LeaseOwner): unknown[] {
  return [o.scope, o.key, o.token];
}

/**
 * Adds the `steps` column to a table made before it existed. SQLite has no `ADD COLUMN IF NOT EXISTS`: the table's
 * columns are read first, and an instance that lost the race to add it finds it there (duplicate column name).
 */
export async function addSqliteStepsColumn(store: SqliteStore, table: TableName): Promise<void> {
  const { schema, name } = table.parts;
  const of = schema ? `'${name}', '${schema}'` : `'${name}'`;
  const info = `SELECT COUNT(*) AS n FROM pragma_table_info(${of}) WHERE name = 'steps'`;
  const rows = (await store.autocommit([plain(info)]))[0] ?? [];
  if (Number(rows[0]?.n) > 0) return;
  try {
    await store.write([`ALTER TABLE ${sqliteTable(table)} ADD COLUMN steps TEXT`]);
  } catch (error) {
    if (!/duplicate column/i.test((error as Error | null)?.message ?? '')) throw error;
  }
}
