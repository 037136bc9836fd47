import {
  CompiledQuery,
  type ControlledTransaction,
  type DatabaseConnection,
  type Kysely,
  type QueryExecutor,
} from 'kysely';
import { type HeldConnection, holdConnection } from '../../connection/held-connection.js';
import { SessionConnectionProvider } from '../../handler-db.js';
import { CommitRolledBackError, runThenRollback } from '../../session.js';
import type { Row, Session } from '../dialect.js';
import { DIVISION_BY_ZERO } from './postgres-errors.js';
import { isExecute, noticeLostStatements, type PreparedStatements, prepareOn } from './postgres-prepared-statements.js';
import { BEGIN } from './postgres-statements.js';

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
  #provider: SessionConnectionProvider;
  #done = false;

  private constructor(trx: ControlledTransaction<any>, root: Kysely<any>, connection: DatabaseConnection) {
    this.#trx = trx;
    this.#own = trx.withoutPlugins();
    this.#root = root;
    // The handler's queries keep the app's plugins (CamelCasePlugin, …), on the transaction's connection through a
    // provider that refuses a transaction keyword.
    this.#provider = new SessionConnectionProvider(connection);
    this.executor = trx.getExecutor().withConnectionProvider(this.#provider);
  }

  /** BEGIN … READ COMMITTED READ WRITE through Kysely (see BEGIN), then `statements`. */
  static async begin(
    db: Kysely<any>,
    statements: readonly string[],
    pglite = false,
  ): Promise<{ session: KyselySession; rows: Row[][] }> {
    const trx = await db.startTransaction().setIsolationLevel('read committed').setAccessMode('read write').execute();
    // Kysely's PGlite driver opens every transaction with a bare BEGIN: the characteristics are said first in it.
    if (pglite) await trx.executeQuery(CompiledQuery.raw(SET_CHARACTERISTICS, []));
    // A controlled transaction holds one connection until it ends: the handler's provider uses that one.
    const connection = await trx.getExecutor().provideConnection(async (c) => c);
    const session = new KyselySession(trx, db.withoutPlugins(), connection);
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

  async commit(statements: readonly string[]): Promise<number | undefined> {
    this.#provider.close();
    try {
      let changed: bigint | undefined;
      for (const text of statements)
        changed = (await this.#own.executeQuery(CompiledQuery.raw(text, []))).numAffectedRows;
      await this.#trx.commit().execute();
      this.#done = true;
      return changed === undefined ? undefined : Number(changed);
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
    this.#provider.close();
    if (!this.#done) {
      this.#done = true;
      if (!this.#trx.isCommitted && !this.#trx.isRolledBack) await this.#trx.rollback().execute();
    }
    const out: Row[][] = [];
    for (const text of after) out.push((await this.#root.executeQuery<Row>(CompiledQuery.raw(text, []))).rows);
    return out;
  }
}

/**
 * The general path on a driver that sends a text without parameters as one simple-protocol round trip, however
 * many statements it holds (node-postgres through Kysely's PostgresDialect; `Store` probes for it once). Kysely
 * then returns no rows for the text (node-postgres answers an array, which Kysely's PostgresConnection does not
 * read), so only statements whose rows nobody reads are joined: the claim (whose outcome a check after the
 * savepoint reports by failing, see `beginClaim`) and a commit's statements. Everything else runs one statement
 * per round trip, as in `KyselySession`. BEGIN and COMMIT are ours, on a connection held for the transaction.
 */
export class JoinedSession implements Session {
  readonly executor: QueryExecutor;
  #held: HeldConnection;
  #provider: SessionConnectionProvider;
  #root: Kysely<any>;
  #done = false;
  #prepared: PreparedStatements | undefined;

  private constructor(held: HeldConnection, root: Kysely<any>, prepared?: PreparedStatements) {
    this.#held = held;
    this.#root = root;
    this.#prepared = prepared;
    this.#provider = new SessionConnectionProvider(held.connection);
    // The handler's queries keep the app's plugins (CamelCasePlugin, …).
    this.executor = root.getExecutor().withConnectionProvider(this.#provider);
  }

  /** BEGIN, then `statements` one by one (their rows are returned). */
  static async begin(
    db: Kysely<any>,
    statements: readonly string[],
  ): Promise<{ session: JoinedSession; rows: Row[][] }> {
    const session = new JoinedSession(await holdConnection(db, sameRow), db);
    try {
      await session.#send([BEGIN]);
      return { session, rows: await session.run(statements) };
    } catch (error) {
      await session.rollback().catch(() => {});
      throw error;
    }
  }

  /**
   * Transaction mode's claim in one round trip: BEGIN, `statements` (the claim, then the handler's savepoint), then
   * `check`, which divides by zero unless this transaction wrote the key's row. Its failure aborts only the
   * savepoint's subtransaction, so `ROLLBACK TO SAVEPOINT` keeps the claim's transaction, its lock wait and its
   * snapshot setting for the read of the row that follows (`finish`).
   */
  static async beginClaim(
    db: Kysely<any>,
    statements: readonly string[],
    check: string,
    rollbackToSavepoint: string,
    prepared?: PreparedStatements,
  ): Promise<{ session: JoinedSession; owned: boolean }> {
    const held = await holdConnection(db, sameRow);
    const session = new JoinedSession(held, db, prepared);
    try {
      // Kysely's driver keeps one DatabaseConnection object per connection: what was prepared on it is known.
      if (prepared && statements.some(isExecute))
        await prepareOn(held.connection, (text) => held.query(text), prepared);
      await session.#send([BEGIN, ...statements, check]);
      return { session, owned: true };
    } catch (error) {
      if ((error as { code?: unknown })?.code === DIVISION_BY_ZERO) {
        try {
          await session.#send([rollbackToSavepoint]);
          return { session, owned: false };
        } catch (again) {
          await session.rollback().catch(() => {});
          throw again;
        }
      }
      await session.rollback().catch(() => {});
      throw error;
    }
  }

  async run(statements: readonly string[]): Promise<Row[][]> {
    const out: Row[][] = [];
    for (const text of statements) out.push((await this.#held.query(text)).rows);
    return out;
  }

  /** `statements` and COMMIT in one round trip; the driver reports none of their row counts. */
  async commit(statements: readonly string[]): Promise<undefined> {
    this.#provider.close();
    let rows: Row[];
    try {
      rows = (await this.#send([...statements, 'COMMIT'])).rows;
    } catch (error) {
      await this.rollback().catch(() => {});
      throw error;
    }
    this.#release();
    // A lone COMMIT of an aborted transaction answers ROLLBACK (Kysely reports the command as a row); with statements
    // ahead of it, the first of them would have failed instead.
    if (rows[0]?.command === 'ROLLBACK') throw new CommitRolledBackError();
    return undefined;
  }

  finish(statements: readonly string[]): Promise<Row[][]> {
    return runThenRollback(this, statements);
  }

  async rollback(after: readonly string[] = []): Promise<Row[][]> {
    if (!this.#done) {
      this.#provider.close();
      try {
        await this.#held.query('ROLLBACK');
      } finally {
        this.#release();
      }
    }
    const out: Row[][] = [];
    for (const text of after) out.push((await this.#root.executeQuery<Row>(CompiledQuery.raw(text, []))).rows);
    return out;
  }

  /** One text, one round trip: node-postgres sends a text without parameters over the simple protocol. */
  async #send(statements: readonly string[]) {
    try {
      return await this.#held.query(statements.join(';\n'));
    } catch (error) {
      noticeLostStatements(this.#held.connection, this.#prepared, error);
      throw error;
    }
  }

  #release(): void {
    this.#provider.close();
    if (this.#done) return;
    this.#done = true;
    this.#held.release();
  }
}

const SET_CHARACTERISTICS = 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED READ WRITE';

function sameRow(row: Row): Row {
  return row;
}
