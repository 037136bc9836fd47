import { CompiledQuery, type ControlledTransaction, type Kysely, type QueryExecutor } from 'kysely';
import { CommitRolledBackError, type Row, runThenRollback, type Session } from './session.js';

/**
 * The general path: a Kysely controlled transaction, one statement per round trip. Works on every
 * Postgres-compatible dialect (pg without `pool`, PGlite, others).
 */
export class KyselySession implements Session {
  readonly executor: QueryExecutor;
  #trx: ControlledTransaction<any>;
  /** The same transaction without the app's plugins: our statements' rows must stay as Postgres names them. */
  #own: ControlledTransaction<any>;
  #root: Kysely<any>;
  #done = false;

  private constructor(trx: ControlledTransaction<any>, root: Kysely<any>) {
    this.#trx = trx;
    this.#own = trx.withoutPlugins();
    this.#root = root;
    // The handler's queries keep the app's plugins (CamelCasePlugin, …).
    this.executor = trx.getExecutor();
  }

  /** BEGIN ISOLATION LEVEL READ COMMITTED through Kysely, then `statements`. */
  static async begin(
    db: Kysely<any>,
    statements: readonly string[],
  ): Promise<{ session: KyselySession; rows: Row[][] }> {
    const trx = await db.startTransaction().setIsolationLevel('read committed').execute();
    const session = new KyselySession(trx, db.withoutPlugins());
    try {
      return { session, rows: await session.run(statements) };
    } catch (error) {
      await session.rollback().catch(() => {});
      throw error;
    }
  }

  async run(statements: readonly string[]): Promise<Row[][]> {
    const out: Row[][] = [];
    for (const text of statements) {
      const result = await this.#own.executeQuery<Row>(CompiledQuery.raw(text, []));
      out.push(result.rows);
    }
    return out;
  }

  async commit(statements: readonly string[]): Promise<Row[][]> {
    try {
      const rows = await this.run(statements);
      await this.#trx.commit().execute();
      this.#done = true;
      return rows;
    } catch (error) {
      await this.rollback().catch(() => {});
      if ((error as { name?: string })?.name === 'AbortedTransactionError') throw new CommitRolledBackError();
      throw error;
    }
  }

  finish(statements: readonly string[]): Promise<Row[][]> {
    return runThenRollback(this, statements);
  }

  async rollback(after: readonly string[] = []): Promise<Row[][]> {
    if (!this.#done) {
      this.#done = true;
      if (!this.#trx.isCommitted && !this.#trx.isRolledBack) await this.#trx.rollback().execute();
    }
    const out: Row[][] = [];
    for (const text of after) out.push((await this.#root.executeQuery<Row>(CompiledQuery.raw(text, []))).rows);
    return out;
  }
}
