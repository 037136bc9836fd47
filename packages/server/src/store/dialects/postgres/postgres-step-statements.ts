import type { TableName } from '../../table-name.js';
import type { LeaseOwner, StepStatements } from '../dialect.js';
import { literal } from './postgres-literal.js';

/**
 * Adds the `steps` column to a table made before it existed (run by `migrate()` after its CREATE TABLE). The catalog
 * is read first: `ALTER TABLE` would take an ACCESS EXCLUSIVE lock on every start, queueing the app's own queries
 * behind any long transaction that touches the table.
 */
export function addStepsColumn(table: TableName): string {
  return `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = ${literal(table.qualified)}::regclass AND attname = 'steps'
    AND NOT attisdropped) THEN
    ALTER TABLE ${table.qualified} ADD COLUMN steps text;
  END IF;
END $$`;
}

/** Postgres (and PGlite): SQL text with embedded literals, like postgres-statements.ts. */
export class PostgresStepStatements implements StepStatements {
  readonly #t: string;

  constructor(table: TableName) {
    this.#t = table.qualified;
  }

  select(owner: LeaseOwner): string {
    return `SELECT steps FROM ${this.#t} WHERE ${owns(owner)}`;
  }

  record(owner: LeaseOwner, steps: string): string {
    return `UPDATE ${this.#t} SET steps = ${literal(steps)} WHERE ${owns(owner)} RETURNING 1 AS recorded`;
  }

  lapse(owner: LeaseOwner): string {
    return `UPDATE ${this.#t} SET locked_until = clock_timestamp() WHERE ${owns(owner)}`;
  }
}

function owns(o: LeaseOwner): string {
  return (
    `scope = ${literal(o.scope)} AND key = ${literal(o.key)} ` +
    `AND token = ${literal(o.token)} AND status = 'in_progress'`
  );
}
