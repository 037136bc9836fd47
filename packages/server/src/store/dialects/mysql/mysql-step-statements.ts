import { plain } from '../../connection/step.js';
import type { TableName } from '../../table-name.js';
import { type LeaseOwner, MAX_SCOPE_BYTES, type Step, type StepConnection, type StepStatements } from '../dialect.js';
import { hexBytes, hexText } from './mysql-literal.js';
import { NOW_MS } from './mysql-statements.js';

/** Lease mode's durable steps on MySQL / MariaDB (StepStatements in ../dialect.ts); values travel as hex literals. */
export class MysqlStepStatements implements StepStatements {
  readonly #t: string;

  constructor(table: TableName) {
    this.#t = quoted(table);
  }

  select(owner: LeaseOwner): Step {
    return plain(`SELECT k.steps FROM ${this.#t} AS k WHERE ${owns(owner)}`);
  }

  /** No RETURNING: the affected rows tell (the text grows with each step, so the row always changes). */
  record(owner: LeaseOwner, steps: string): Step {
    const update = `UPDATE ${this.#t} AS k SET k.steps = ${hexBytes(steps)} WHERE ${owns(owner)}`;
    return async (c) => (Number((await c.query(update)).numAffectedRows ?? 0) > 0 ? [{ recorded: 1 }] : []);
  }

  lapse(owner: LeaseOwner): Step {
    return plain(`UPDATE ${this.#t} AS k SET k.locked_until = ${NOW_MS} WHERE ${owns(owner)}`);
  }
}

function owns(o: LeaseOwner): string {
  return (
    `k.scope = ${hexText(o.scope, MAX_SCOPE_BYTES)} AND k.\`key\` = ${hexText(o.key)} ` +
    `AND k.token = ${hexText(o.token)}
  AND k.status = 'in_progress'`
  );
}

/**
 * Adds the `steps` column to a table made before it existed, under migrate()'s named lock. MySQL 8 has no
 * `ADD COLUMN IF NOT EXISTS`, so the catalog is read first (which also spares a table that has it an ALTER).
 */
export async function addMysqlStepsColumn(held: StepConnection, table: TableName): Promise<void> {
  const { schema, name } = table.parts;
  const { rows } = await held.query(
    `SELECT COUNT(*) AS n FROM information_schema.columns
WHERE table_schema = ${schema ? hexText(schema) : 'DATABASE()'} AND table_name = ${hexText(name)} ` +
      `AND column_name = 'steps'`,
  );
  if (Number(rows[0]?.n) > 0) return;
  await held.query(`ALTER TABLE ${quoted(table)} ADD COLUMN steps LONGBLOB NULL`);
}

function quoted(table: TableName): string {
  const { schema, name } = table.parts;
  return schema ? `\`${schema}\`.\`${name}\`` : `\`${name}\``;
}
