import type { Kysely, QueryExecutor } from 'kysely';
import type { Row, Session, Statement, Step } from '../dialects/dialect.js';
import { SessionConnectionProvider } from '../handler-db.js';
import { runThenRollback } from '../session.js';
import type { HeldConnection } from './held-connection.js';

/**
 * A transaction of the MySQL or SQLite store on one held connection: our steps run on it one by one, the
 * handler's Kysely queries (with the app's plugins) run on it through `executor`. The dialect says how the
 * transaction is opened; it is ended here with COMMIT or ROLLBACK, and on every path the connection's release
 * steps (MySQL's lease lock) run before it goes back to the pool.
 */
export class ConnectionSession implements Session {
  readonly executor: QueryExecutor;
  #held: HeldConnection;
  #provider: SessionConnectionProvider;
  #autocommit: (statements: readonly Statement[]) => Promise<Row[][]>;
  #commit: (held: HeldConnection) => Promise<unknown>;
  #done = false;
  /** False while the connection runs in autocommit (see `noTransaction`): ending the session sends no ROLLBACK. */
  #inTransaction = true;

  /**
   * `autocommit` runs a rollback's `after` statements once the connection is given back; `commit` ends the
   * transaction (SQLite's waits for other connections' readers).
   */
  constructor(
    held: HeldConnection,
    root: Kysely<any>,
    autocommit: (statements: readonly Statement[]) => Promise<Row[][]>,
    commit: (held: HeldConnection) => Promise<unknown>,
  ) {
    this.#held = held;
    this.#commit = commit;
    this.#provider = new SessionConnectionProvider(held.connection);
    this.executor = root.getExecutor().withConnectionProvider(this.#provider);
    this.#autocommit = autocommit;
  }

  async run(statements: readonly Statement[]): Promise<Row[][]> {
    return runSteps(this.#held, statements);
  }

  /** A completion's step checks its own row count before the COMMIT (see step.ts): none is returned. */
  async commit(statements: readonly Statement[]): Promise<undefined> {
    try {
      await this.run(statements);
      await this.#commit(this.#held);
    } catch (error) {
      await this.rollback().catch(() => {});
      throw error;
    }
    await this.#release();
    return undefined;
  }

  finish(statements: readonly Statement[]): Promise<Row[][]> {
    return runThenRollback(this, statements);
  }

  /**
   * Says that no transaction is open on the connection (MySQL's lease claim that lost ran in autocommit, and the
   * read of the row that follows does too): its end is one round trip fewer, no ROLLBACK.
   */
  noTransaction(): void {
    this.#inTransaction = false;
  }

  /** ROLLBACK, then `after` in autocommit; returns the rows of `after`. */
  async rollback(after: readonly Statement[] = []): Promise<Row[][]> {
    if (!this.#done) {
      this.#provider.close();
      try {
        if (this.#inTransaction) await this.#held.query('ROLLBACK');
      } finally {
        await this.#release();
      }
    }
    return after.length > 0 ? this.#autocommit(after) : [];
  }

  /** Gives the connection back once, after what its steps left to undo (see StepConnection.onRelease). */
  async #release(): Promise<void> {
    this.#provider.close();
    if (this.#done) return;
    this.#done = true;
    await this.#held.release();
  }
}

/** Runs steps in order on one connection; returns each one's rows. */
export async function runSteps(held: HeldConnection, statements: readonly Statement[]): Promise<Row[][]> {
  const out: Row[][] = [];
  for (const statement of statements) out.push(await asStep(statement)(held));
  return out;
}

function asStep(statement: Statement): Step {
  if (typeof statement === 'string') throw new TypeError('idempotency: SQL text reached a MySQL or SQLite session');
  return statement;
}
