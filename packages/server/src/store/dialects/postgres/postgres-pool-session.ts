import type { CompiledQuery, DatabaseConnection, Kysely, QueryExecutor, QueryResult } from 'kysely';
import { SessionConnectionProvider } from '../../handler-db.js';
import { CommitRolledBackError } from '../../session.js';
import type { Row, Session } from '../dialect.js';
import type { PgClientLike, PgPoolLike, PgResultLike } from './pg-pool-like.js';
import { isExecute, noticeLostStatements, type PreparedStatements, prepareOn } from './postgres-prepared-statements.js';
import { BEGIN } from './postgres-statements.js';

/**
 * The pg fast path: our statements travel as one simple-protocol text per call (the claim with BEGIN, the
 * completion with COMMIT), so a first execution costs two round trips of our own. The handler's Kysely runs on
 * the same checked-out client.
 */
export class PoolSession implements Session {
  readonly executor: QueryExecutor;
  #client: PgClientLike;
  #provider: SessionConnectionProvider;
  #released = false;
  /** Set when the connection died while we held it; the client is then discarded on release. */
  #broken: Error | undefined;
  #onError = (error: Error) => {
    this.#broken = error;
  };

  #prepared: PreparedStatements | undefined;

  private constructor(client: PgClientLike, root: Kysely<any>, prepared: PreparedStatements | undefined) {
    this.#client = client;
    this.#prepared = prepared;
    client.on?.('error', this.#onError);
    this.#provider = new SessionConnectionProvider(new PgClientConnection(client));
    this.executor = root.getExecutor().withConnectionProvider(this.#provider);
  }

  /**
   * Checks out a client and opens the transaction, in one round trip with `statements` after the BEGIN and
   * `before` ahead of it (lease mode commits its claim there: `BEGIN; claim; COMMIT`). Rows of both, in order.
   */
  static async begin(
    pool: PgPoolLike,
    root: Kysely<any>,
    statements: readonly string[],
    before: readonly string[] = [],
    prepared?: PreparedStatements,
  ): Promise<{ session: PoolSession; rows: Row[][] }> {
    const client = await pool.connect();
    const session = new PoolSession(client, root, prepared);
    try {
      if (prepared && statements.some(isExecute)) await prepareOn(client, (text) => client.query(text), prepared);
      const rows = await session.#send([...before, BEGIN, ...statements]);
      rows.splice(before.length, 1);
      return { session, rows };
    } catch (error) {
      await session.rollback().catch(() => {});
      throw error;
    }
  }

  run(statements: readonly string[]): Promise<Row[][]> {
    return this.#send(statements);
  }

  async commit(statements: readonly string[]): Promise<number | undefined> {
    const results = await this.#end(statements, 'COMMIT');
    if (results[results.length - 1]?.command === 'ROLLBACK') throw new CommitRolledBackError();
    return statements.length > 0 ? (results[results.length - 2]?.rowCount ?? undefined) : undefined;
  }

  async finish(statements: readonly string[]): Promise<Row[][]> {
    if (this.#released) throw new Error('idempotency: session already finished');
    return (await this.#end(statements, 'ROLLBACK')).slice(0, -1).map((r) => r.rows ?? []);
  }

  /** Sends `statements` and the transaction's end in one round trip, then gives the client back. */
  async #end(statements: readonly string[], end: 'COMMIT' | 'ROLLBACK'): Promise<PgResultLike[]> {
    // From here on the handler's queries are refused: one it started without awaiting would queue on the client
    // behind the transaction's end and run outside it.
    this.#provider.close();
    let results: PgResultLike[];
    try {
      results = await this.#sendRaw([...statements, end]);
    } catch (error) {
      await this.rollback().catch(() => {});
      throw error;
    }
    this.#release();
    return results;
  }

  async rollback(after: readonly string[] = []): Promise<Row[][]> {
    if (this.#released) throw new Error('idempotency: session already finished');
    this.#provider.close();
    let results: PgResultLike[];
    try {
      results = await this.#sendRaw(['ROLLBACK', ...after]);
    } catch (error) {
      // A client whose ROLLBACK failed is in an unknown state: the pool must discard it.
      this.#release(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    this.#release();
    return results.slice(1).map((r) => r.rows ?? []);
  }

  async #send(statements: readonly string[]): Promise<Row[][]> {
    return (await this.#sendRaw(statements)).map((r) => r.rows ?? []);
  }

  async #sendRaw(statements: readonly string[]): Promise<PgResultLike[]> {
    let result: PgResultLike | PgResultLike[];
    try {
      result = await this.#client.query(statements.join(';\n'));
    } catch (error) {
      noticeLostStatements(this.#client, this.#prepared, error);
      throw error;
    }
    return Array.isArray(result) ? result : [result];
  }

  #release(error?: Error): void {
    this.#provider.close();
    if (this.#released) return;
    this.#released = true;
    this.#client.removeListener?.('error', this.#onError);
    this.#client.release(error ?? this.#broken);
  }
}

/** A Kysely connection over a checked-out `pg` client, mapping results the way Kysely's own Postgres driver does. */
class PgClientConnection implements DatabaseConnection {
  #client: PgClientLike;

  constructor(client: PgClientLike) {
    this.#client = client;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const raw = await this.#client.query(compiledQuery.sql, compiledQuery.parameters);
    const result = Array.isArray(raw) ? raw[raw.length - 1]! : raw;
    const { command, rowCount, rows } = result;
    const affects = command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
    return {
      numAffectedRows: affects ? BigInt(rowCount ?? 0) : undefined,
      rows: (rows ?? []) as R[],
    };
  }

  // biome-ignore lint/correctness/useYield: streaming is refused before it starts.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming is not supported on ctx.idempotency.db with the `pool` fast path');
  }
}
