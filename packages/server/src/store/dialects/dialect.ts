import type { Row, Session, Statement } from '../session.js';
import type { RowKey, Statements } from '../statements.js';
import type { StepStatements } from '../step-statements.js';

/** The SQL dialects the store speaks. */
export type DialectName = 'postgres' | 'mysql' | 'sqlite';

/**
 * The longest scope, in UTF-8 bytes, on every dialect. Postgres: an entry of the primary-key btree holds at most
 * 2704 bytes after compression, so with the longest key (255) an incompressible scope over ~2400 bytes fails the
 * claim, and whether a longer one fits depends on how well it compresses. MySQL/MariaDB: VARBINARY(2048), with the
 * 255-byte key within InnoDB's 3072-byte index prefix. SQLite holds more, but every dialect accepts the same scopes.
 */
export const MAX_SCOPE_BYTES = 2048;

/**
 * The statements the modes send, one set per dialect. Postgres builds SQL text (the fast path joins several into
 * one round trip); MySQL and SQLite build steps that run on a held connection. The modes only hand them on.
 */
export type StatementSet = {
  [K in keyof Statements]: (
    ...args: Parameters<Statements[K]>
  ) => ReturnType<Statements[K]> extends readonly string[] ? Statement[] : Statement;
};

/** Where the modes get transactions and autocommit statements from, on every dialect. */
export interface KeyStore {
  /** True when a statement list costs one round trip (the pg fast path). */
  readonly pipelined: boolean;
  /** True when this process reaches the database through one connection: duplicates queue in JavaScript. */
  readonly singleConnection: boolean;
  /**
   * The largest result, in UTF-8 bytes, one statement can store (MySQL: from `max_allowed_packet`), known once
   * `ready()` resolved; undefined when only `maxResponseBytes` bounds it. A larger one is `response_too_large`.
   */
  readonly maxResultBytes?: number | undefined;
  /** Learns once what it needs of the server (PGlite or not, MariaDB or MySQL, SQLite settings). */
  ready(): Promise<void> | undefined;
  /**
   * Opens a transaction (Postgres: READ COMMITTED; MySQL: at the app's own isolation level; SQLite: BEGIN IMMEDIATE)
   * and runs `statements` in it.
   */
  begin(statements: readonly Statement[]): Promise<{ session: Session; rows: Row[][] }>;
  /**
   * Postgres general path on a driver that joins statements: opens the transaction with `statements` (the claim,
   * then the handler's savepoint) in one round trip and tells whether the claim owns `key`. Undefined elsewhere:
   * the caller then opens it with `begin` and reads the claim's rows.
   */
  beginClaim?(statements: readonly Statement[], key: RowKey): Promise<{ session: Session; owned: boolean }> | undefined;
  /**
   * `commitThenBegin` serves lease mode's claim: the pg fast path (one round trip), and MySQL (the claim and the
   * handler's transaction on one connection, so the key's lease lock is never without a holder, see MysqlStore).
   */
  readonly commitsThenBegins: boolean;
  /** Commits `statement` (lease mode's claim) and opens the handler's transaction with `after` in it. */
  commitThenBegin(statement: Statement, after?: readonly Statement[]): Promise<{ session: Session; rows: Row[][] }>;
  /** Runs statements outside any transaction of ours. */
  autocommit(statements: readonly Statement[]): Promise<Row[][]>;
  /** Runs a lease renewal (autocommit) and returns its rows; on the pg fast path on a connection of its own. */
  renew(statement: Statement): Promise<Row[]>;
  /** A lease is about to need renewals (the pg fast path opens their connection). */
  warmRenewals(): void;
  /** No lease is left to renew. */
  renewalsIdle(): void;
}

/** One dialect's store, statements, DDL and purge, chosen once per `createIdempotency`. */
export interface StoreDialect {
  readonly name: DialectName;
  readonly store: KeyStore;
  readonly sql: StatementSet;
  /** Lease mode's durable steps (modes/steps.ts). */
  readonly steps: StepStatements;
  /** Creates the table and its expiry index if missing; safe when several instances run it at once. */
  migrate(): Promise<void>;
  /** Deletes at most `batchSize` expired rows (never a live lease); returns how many. */
  purgeBatch(batchSize: number): Promise<number>;
}
