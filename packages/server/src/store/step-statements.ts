import type { Statement } from './session.js';
import { literal } from './sql-literal.js';
import type { RowKey } from './statements.js';
import type { TableName } from './table-name.js';

/** A lease owner: the row it claimed and the fencing token that proves it. */
export type StepOwner = RowKey & { token: string };

/**
 * The statements of lease mode's durable steps (modes/steps.ts), one set per dialect. Each is fenced by the owner's
 * token, so an owner that was taken over can neither read nor record the new owner's steps.
 */
export interface StepStatements {
  /** Reads the `steps` column of the owner's row: one row (its `steps` text or NULL), none when it lost the key. */
  select(owner: StepOwner): Statement;
  /** Stores `steps` on the owner's row; returns one row when it did, none when a takeover replaced the token. */
  record(owner: StepOwner, steps: string): Statement;
  /**
   * Frees a claim that recorded steps without deleting them: its lease ends now, so a retry takes the key over at
   * once (it may, once the holder's transaction and lock are gone) and replays the recorded steps.
   */
  lapse(owner: StepOwner): Statement;
}

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

/** Postgres (and PGlite): SQL text with embedded literals, like statements.ts. */
export class PostgresStepStatements implements StepStatements {
  readonly #t: string;

  constructor(table: TableName) {
    this.#t = table.qualified;
  }

  select(owner: StepOwner): string {
    return `SELECT steps FROM ${this.#t} WHERE ${owns(owner)}`;
  }

  record(owner: StepOwner, steps: string): string {
    return `UPDATE ${this.#t} SET steps = ${literal(steps)} WHERE ${owns(owner)} RETURNING 1 AS recorded`;
  }

  lapse(owner: StepOwner): string {
    return `UPDATE ${this.#t} SET locked_until = clock_timestamp() WHERE ${owns(owner)}`;
  }
}

function owns(o: StepOwner): string {
  return `scope = ${literal(o.scope)} AND key = ${literal(o.key)} AND token = ${literal(o.token)} AND status = 'in_progress'`;
}
