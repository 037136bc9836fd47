import {
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryExecutor,
  Transaction,
} from 'kysely';

/**
 * Hands out one connection to the handler's queries, one at a time, and refuses once our transaction is over:
 * a query the handler forgot to await must fail rather than run on a connection already back in the pool.
 */
export class SessionConnectionProvider {
  #connection: DatabaseConnection;
  #closed = false;
  #running: Promise<unknown> = Promise.resolve();

  /** `ends` tells the statements that would end the call's transaction (see `endsTransaction`): they are refused. */
  constructor(connection: DatabaseConnection, ends: (statement: string) => boolean = endsTransaction) {
    const refuse = (text: string) => {
      if (statementsOf(text).some(ends)) throw new TransactionControlError(text);
    };
    this.#connection = {
      executeQuery: (query) => {
        refuse(query.sql);
        return connection.executeQuery(query);
      },
      streamQuery: (query, chunkSize) => {
        refuse(query.sql);
        return connection.streamQuery(query, chunkSize);
      },
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
 * The handler sent a statement that would end the call's transaction: its writes would commit (or vanish) apart from
 * the stored result, and the key's claim with them. Refused before it reaches the database.
 */
export class TransactionControlError extends Error {
  constructor(text: string) {
    super(
      `ctx.idempotency.db cannot end the call's transaction (refused: ${JSON.stringify(text.slice(0, 80))}): the middleware commits the handler's writes together with their stored result`,
    );
  }
}

/**
 * A statement (its text without strings, quoted names and comments) that ends the transaction it runs in, or opens
 * another, on Postgres and SQLite: BEGIN, START TRANSACTION, COMMIT, END, ABORT, ROLLBACK (but not ROLLBACK TO a
 * savepoint: the handler's own savepoints are its business), PREPARE TRANSACTION, and MySQL's `SET autocommit`.
 */
export function endsTransaction(statement: string): boolean {
  return ENDS.test(statement);
}

/** `endsTransaction`, plus what MySQL commits implicitly: DDL other than on temporary tables, LOCK TABLES, grants. */
export function endsMysqlTransaction(statement: string): boolean {
  return ENDS.test(statement) || MYSQL_IMPLICIT_COMMIT.test(statement);
}

const ENDS =
  /^\s*(?:begin|start|commit|end|abort|rollback(?!\s+(?:work\s+|transaction\s+)?to\b)|prepare\s+transaction|set\s+(?:@@(?:session\.)?|session\s+)?autocommit)\b/i;
const MYSQL_IMPLICIT_COMMIT =
  /^\s*(?:alter|create(?!\s+temporary)|drop(?!\s+temporary)|rename|truncate|lock|unlock|grant|revoke|analyze|optimize|repair|flush|install|uninstall|load\s+index|cache\s+index)\b/i;

/**
 * The statements of a text, with string literals (standard, E'…' with backslashes, dollar-quoted), quoted names
 * and comments blanked out, so a `;` or a keyword inside them is not read as a statement.
 */
function statementsOf(text: string): string[] {
  return text.replace(QUOTED, ' ').split(';');
}

const QUOTED =
  /'(?:[^'\\]|\\.|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\$([A-Za-z_]\w*)?\$[\s\S]*?\$\1\$|--[^\n]*|\/\*[\s\S]*?\*\//g;

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
