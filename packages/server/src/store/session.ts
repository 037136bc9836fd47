import type { QueryExecutor } from 'kysely';
import type { Step } from './dialects/step.js';

/**
 * How every Postgres transaction of ours opens. Each characteristic is said, not inherited from the session: a
 * handler's `SET SESSION CHARACTERISTICS …` or `SET default_transaction_…` commits with its call and stays on the
 * pooled connection, where it must not make the next calls' claims read-only or serializable.
 */
export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE';

/** One result row of our own statements. */
export type Row = Record<string, unknown>;

/** One of our statements: Postgres SQL text, or a MySQL / SQLite step (see dialects/step.ts). */
export type Statement = string | Step;

/**
 * One READ COMMITTED transaction on one connection, driven by the modes. The pg fast path sends each call as a
 * single multi-statement round trip; the general path runs the statements one by one through Kysely.
 */
export interface Session {
  /** Runs statements inside the transaction; returns each statement's rows. */
  run(statements: readonly Statement[]): Promise<Row[][]>;
  /**
   * Runs statements then COMMIT; throws when the commit turned into a rollback. Its result is not to be read: on
   * the Postgres general path the statements share COMMIT's round trip, which reports none of their rows (see
   * JoinedSession).
   */
  commit(statements: readonly Statement[]): Promise<unknown>;
  /** Runs statements inside the transaction, then ROLLBACK; returns their rows and gives the connection back. */
  finish(statements: readonly Statement[]): Promise<Row[][]>;
  /** ROLLBACK, then `after` in autocommit; gives the connection back. Returns the rows of `after`. */
  rollback(after?: readonly Statement[]): Promise<Row[][]>;
  /** The executor the handler's `ctx.idempotency.db` runs on: this transaction's connection, closed with it. */
  readonly executor: QueryExecutor;
}

/** Error thrown when a COMMIT was answered with ROLLBACK (a statement in the transaction had failed). */
export class CommitRolledBackError extends Error {
  constructor() {
    super('the transaction was rolled back at COMMIT: a statement inside it had failed');
  }
}

/**
 * Runs `statements` in the session's transaction, then `end` (commit or roll back); when they fail, rolls back
 * instead and rethrows (the failure is then what the caller sees).
 */
export async function runThen<S extends Statement>(
  session: { run(statements: readonly S[]): Promise<Row[][]>; rollback(): Promise<Row[][]> },
  statements: readonly S[],
  end: () => Promise<unknown>,
): Promise<Row[][]> {
  let rows: Row[][];
  try {
    rows = await session.run(statements);
  } catch (error) {
    await session.rollback().catch(() => {});
    throw error;
  }
  await end();
  return rows;
}

/** `Session.finish` for every session: runs `statements` in the transaction, then rolls it back. */
export function runThenRollback<S extends Statement>(
  session: { run(statements: readonly S[]): Promise<Row[][]>; rollback(): Promise<Row[][]> },
  statements: readonly S[],
): Promise<Row[][]> {
  return runThen(session, statements, () => session.rollback());
}
