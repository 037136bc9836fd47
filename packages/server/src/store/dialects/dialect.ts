import type { QueryExecutor, QueryResult } from 'kysely';

/*
 * The contract every dialect implements (see README.md beside this file): a `StoreDialect` bundles a `Store` (where
 * transactions come from), its `Statements` and `StepStatements` (what runs in them), `DialectErrors` (what its
 * driver's errors mean), and the table's DDL and purge. The modes see only these types, never a dialect's files.
 */

/** The SQL dialects the store speaks. */
export type DialectName = 'postgres' | 'mysql' | 'sqlite';

/**
 * The longest scope, in UTF-8 bytes, on every dialect. Postgres: an entry of the primary-key btree holds at most
 * 2704 bytes after compression, so with the longest key (255) an incompressible scope over ~2400 bytes fails the
 * claim, and whether a longer one fits depends on how well it compresses. MySQL/MariaDB: VARBINARY(2048), with the
 * 255-byte key within InnoDB's 3072-byte index prefix. SQLite holds more, but every dialect accepts the same scopes.
 */
export const MAX_SCOPE_BYTES = 2048;

/** One result row of our own statements. */
export type Row = Record<string, unknown>;

/** What a step may do on the connection it runs on: one statement at a time, with bound parameters. */
export interface StepConnection {
  query(sql: string, parameters?: readonly unknown[]): Promise<QueryResult<Row>>;
  /**
   * Runs `step` on this connection once our transaction (or autocommit list) on it has ended, before the connection
   * goes back to the pool, whichever way it ended: for what outlives a transaction in the session (MySQL's named
   * locks), which the next borrower of a pooled connection must never inherit.
   */
  onRelease(step: Step): void;
}

/**
 * One statement of the MySQL or SQLite store as the modes hand it on: a small program on a held connection, so a
 * claim can decide ownership from affected rows or a caught duplicate-key error where Postgres reads RETURNING.
 * `lockWaitMs` is the claim's bound on waiting for another holder of the key (SQLite applies it to the
 * BEGIN IMMEDIATE that takes the write lock). Helpers that build steps: store/connection/step.ts.
 */
export interface Step {
  (connection: StepConnection): Promise<Row[]>;
  lockWaitMs?: number;
}

/** One of our statements: SQL text (Postgres), or a step on a held connection (MySQL, SQLite). */
export type Statement = string | Step;

/** What identifies one call's row. */
export interface RowKey {
  scope: string;
  key: string;
}

/** A call's claim: its row key plus what the row records about it. */
export interface ClaimValues extends RowKey {
  fingerprint: string;
  path: string;
  ttlMs: number;
}

/** A lease-mode claim: the call's claim, its fencing token and how long the lease lasts. */
export type LeaseClaim = ClaimValues & { token: string; leaseMs: number };

/** A lease owner: the row it claimed and the fencing token that proves it. */
export type LeaseOwner = RowKey & { token: string };

/**
 * One transaction on one connection, driven by the modes (Postgres: READ COMMITTED). The pg fast path sends each
 * call as a single multi-statement round trip; the other paths run the statements one by one.
 */
export interface Session {
  /** Runs statements inside the transaction; returns each statement's rows. */
  run(statements: readonly Statement[]): Promise<Row[][]>;
  /**
   * Runs statements then COMMIT; throws when the commit turned into a rollback. Returns how many rows the last of
   * `statements` changed where the session learns it (see Store.commitCounts), else undefined.
   */
  commit(statements: readonly Statement[]): Promise<number | undefined>;
  /** Runs statements inside the transaction, then ROLLBACK; returns their rows and gives the connection back. */
  finish(statements: readonly Statement[]): Promise<Row[][]>;
  /** ROLLBACK, then `after` in autocommit; gives the connection back. Returns the rows of `after`. */
  rollback(after?: readonly Statement[]): Promise<Row[][]>;
  /** The executor the handler's `ctx.idempotency.db` runs on: this transaction's connection, closed with it. */
  readonly executor: QueryExecutor;
}

/** Where the modes get transactions and autocommit statements from, on every dialect. */
export interface Store {
  /** True when a statement list costs one round trip (the pg fast path). */
  readonly pipelined: boolean;
  /**
   * True when `Session.commit` returns how many rows its last statement changed (Postgres, but for the general path's
   * joined commit: see JoinedSession), known once `ready()` resolved.
   */
  readonly commitCounts?: boolean;
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

/**
 * The statements the modes send, one set per dialect. Postgres builds SQL text (the fast path joins several into
 * one round trip); MySQL and SQLite build steps that run on a held connection. The modes only hand them on. What
 * each must do is said on PostgresStatements' methods, the reference the other dialects follow.
 */
export interface Statements {
  /** Transaction-mode claim; the last statement returns `expires_ms` only when this call now owns the key. */
  claimTransaction(v: ClaimValues, lockTimeoutMs?: number): Statement[];
  /** Transaction mode, after an expired row was found: takes it over, `expires_ms` when this call owns the key. */
  takeOverTransaction(v: ClaimValues, lockTimeoutMs?: number): Statement[];
  /** Lease-mode claim (autocommit): the row in_progress with a lease and fencing token; `expires_ms` when owned. */
  claimLease(v: LeaseClaim): Statement;
  /** Lease mode: takes over an expired row, or a dead holder's claim of the same payload; `expires_ms` when owned. */
  takeOverLease(v: LeaseClaim): Statement;
  /** Lease mode, first in the holder's transaction: the last statement's rows are empty when the key was lost. */
  holdLease(r: LeaseOwner): Statement[];
  /** Reads the row as it is now. */
  select(r: RowKey): Statement;
  /** The handler's savepoint, and its release and rollback. */
  savepoint(): Statement;
  releaseSavepoint(): Statement;
  rollbackToSavepoint(): Statement;
  /**
   * Transaction mode: stores the result on this transaction's claim. MySQL and SQLite fail unless it did; Postgres
   * only when `guarded` (see PostgresStatements.complete). `prepared`: this transaction's claim ran prepared
   * (Postgres; ignored elsewhere).
   */
  complete(r: RowKey, response: string, ttlMs: number, prepared?: boolean, guarded?: boolean): Statement;
  /**
   * Postgres only, where a completion's row count arrives after its COMMIT (see Store.commitCounts): autocommit,
   * stores `response` (the error that says why) on a key whose completion changed no row.
   */
  storeLostClaim?(v: ClaimValues, response: string): Statement;
  /**
   * Postgres only: `claim` (from `claimTransaction` / `takeOverTransaction`) ran as the prepared claim, which proves
   * its connection has the prepared completion (`complete`'s `prepared`). Absent: never.
   */
  ranPrepared?(claim: readonly Statement[]): boolean;
  /**
   * Postgres only: `row`, read by `select` after a claim found the key taken, was committed after that claim began,
   * so the claim waited for the original (the `waited` event). Absent: never told.
   */
  waitedFor?(row: Row): boolean;
  /** Lease mode: stores the result only while `r.token` still owns the row, else fails. */
  completeFenced(r: LeaseOwner, response: string, ttlMs: number): Statement;
  /** Lease mode, autocommit: extends the listed owners' leases; returns the token of each one renewed. */
  renewLeases(owners: readonly (LeaseOwner & { locked: boolean })[], leaseMs: number): Statement;
  /** Lease mode, autocommit: frees the key after a failure, if this owner still holds it. */
  releaseLease(r: LeaseOwner): Statement;
  /** Lease mode, autocommit: stores a deterministic error after the handler's transaction was rolled back. */
  storeErrorFenced(r: LeaseOwner, response: string, ttlMs: number): Statement;
}

/**
 * The statements of lease mode's durable steps (modes/steps.ts), one set per dialect. Each is fenced by the owner's
 * token, so an owner that was taken over can neither read nor record the new owner's steps.
 */
export interface StepStatements {
  /** Reads the `steps` column of the owner's row: one row (its `steps` text or NULL), none when it lost the key. */
  select(owner: LeaseOwner): Statement;
  /** Stores `steps` on the owner's row; returns one row when it did, none when a takeover replaced the token. */
  record(owner: LeaseOwner, steps: string): Statement;
  /**
   * Frees a claim that recorded steps without deleting them: its lease ends now, so a retry takes the key over at
   * once (it may, once the holder's transaction and lock are gone) and replays the recorded steps.
   */
  lapse(owner: LeaseOwner): Statement;
}

/**
 * What a dialect's driver errors mean. Each dialect owns its codes (SQLSTATEs, MySQL error numbers, `SQLITE_` codes,
 * driver messages); the modes ask only these questions.
 */
export interface DialectErrors {
  /** The claim waited `wait` for the in-flight original and gave up: 409. */
  isLockTimeout(error: unknown): boolean;
  /** The statement was cancelled (a statement timeout, a KILL): at the claim nothing ran, 409 like a lock timeout. */
  isCancelled(error: unknown): boolean;
  /** The key table is missing: `migrate()` was not run. */
  isUndefinedTable(error: unknown): boolean;
  /** The database could not be reached or dropped the connection (a wrapped `cause` too): 503 at the claim. */
  isUnavailable(error: unknown): boolean;
  /** Lease mode's `completeFenced` found its token replaced by a takeover: nothing of this owner committed. */
  isFencedOff(error: unknown): boolean;
  /** Transaction mode's `complete` found no claim of this call to store the result on: nothing committed. */
  isClaimLost(error: unknown): boolean;
  /** The completion found no transaction or no savepoint: the handler's own SQL ended the call's transaction. */
  isTransactionGone(error: unknown): boolean;
  /** Postgres only: the claim failed before anything ran, the connection's prepared statements not being ours. */
  isPreparedStatementMismatch?(error: unknown): boolean;
  /** Postgres only: the prepared completion was gone from its connection (the handler ran DEALLOCATE). */
  isPreparedStatementLost?(error: unknown): boolean;
}

/** One dialect's store, statements, errors, DDL and purge, chosen once per `createIdempotency`. */
export interface StoreDialect {
  readonly name: DialectName;
  readonly store: Store;
  readonly sql: Statements;
  /** Lease mode's durable steps (modes/steps.ts). */
  readonly stepSql: StepStatements;
  /** What its driver's errors mean. */
  readonly errors: DialectErrors;
  /** Creates the table and its expiry index if missing; safe when several instances run it at once. */
  migrate(): Promise<void>;
  /** Deletes at most `batchSize` expired rows (never a live lease); returns how many. */
  purgeBatch(batchSize: number): Promise<number>;
}
