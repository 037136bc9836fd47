import type { Row, Statement } from './dialects/dialect.js';

/* What every dialect's sessions share (the Session contract is in dialects/dialect.ts). */

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
