import {
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryExecutor,
  Transaction,
} from 'kysely';
import { startsWithTransactionKeyword, TransactionControlError } from './transaction-keyword.js';

/**
 * Hands out one connection to the handler's queries, one at a time, and refuses once our transaction is over:
 * a query the handler forgot to await must fail rather than run on a connection already back in the pool.
 */
export class SessionConnectionProvider {
  #connection: DatabaseConnection;
  #closed = false;
  #running: Promise<unknown> = Promise.resolve();

  /** A statement that starts with a transaction keyword is refused (see `startsWithTransactionKeyword`). */
  constructor(connection: DatabaseConnection) {
    const checked = <Q extends CompiledQuery>(query: Q): Q => {
      if (startsWithTransactionKeyword(query.sql)) throw new TransactionControlError(query.sql);
      return query;
    };
    this.#connection = {
      executeQuery: (query) => connection.executeQuery(checked(query)),
      streamQuery: (query, chunkSize) => connection.streamQuery(checked(query), chunkSize),
    };
  }

  close(): void {
    this.#closed = true;
  }

  provideConnection<T>(consumer: (connection: DatabaseConnection) => Promise<T>): Promise<T> {
    const run = async () => {
      if (this.#closed) {
        throw new Error(
          'ctx.idempotency.db was used after the idempotent call finished: await every query inside the handler',
        );
      }
      return consumer(this.#connection);
    };
    // One statement at a time on the connection, like Kysely's own transactions.
    const next = this.#running.then(run, run);
    this.#running = next.catch(() => {});
    return next;
  }
}

/**
 * A `Transaction<DB>` over `executor`, built per call without touching the root Kysely's dialect or pool.
 * Like every Kysely `Transaction`, `.transaction()` / `.connection()` / `.destroy()` on it throw, so a handler
 * cannot commit our transaction behind our back. `introspection` is delegated to the root instance.
 */
export function createHandlerDb<DB>(root: Kysely<DB>, executor: QueryExecutor): Transaction<DB> {
  return new Transaction<DB>({
    config: NO_CONFIG,
    driver: NO_DRIVER,
    dialect: { ...NO_DIALECT, createIntrospector: () => root.introspection },
    executor,
  });
}

const unsupported = () => {
  throw new Error('not available on ctx.idempotency.db');
};
const NO_CONFIG = Object.freeze({}) as never;
const NO_DRIVER = Object.freeze({
  init: unsupported,
  acquireConnection: unsupported,
  beginTransaction: unsupported,
  commitTransaction: unsupported,
  rollbackTransaction: unsupported,
  releaseConnection: unsupported,
  destroy: unsupported,
}) as unknown as Driver;
const NO_DIALECT = {
  createDriver: unsupported,
  createQueryCompiler: unsupported,
  createAdapter: unsupported,
} as unknown as Omit<Dialect, 'createIntrospector'>;
