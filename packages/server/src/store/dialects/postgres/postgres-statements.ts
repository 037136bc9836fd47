/*
 * Over 300 lines on purpose: every statement of the Statements contract for Postgres, and the SQL fragments they
 * share (lock-wait bound, timeouts, expiry), in one file, so what the claim, takeover and completion send can be
 * read and reviewed side by side. The other dialects' statements mirror this file method by method.
 */

import { int } from '../../sql-int.js';
import type { TableName } from '../../table-name.js';
import type { ClaimValues, LeaseClaim, LeaseOwner, Row, RowKey, Statement, Statements } from '../dialect.js';
import { literal } from './postgres-literal.js';
import { isExecute, type PreparedStatements } from './postgres-prepared-statements.js';
import { committedBefore } from './postgres-snapshot.js';

/**
 * How every Postgres transaction of ours opens. Each characteristic is said, not inherited from the session: a
 * handler's `SET SESSION CHARACTERISTICS …` or `SET default_transaction_…` commits with its call and stays on the
 * pooled connection, where it must not make the next calls' claims read-only or serializable.
 */
export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE';

/**
 * Transaction-local settings: the caller's lock_timeout and statement_timeout while ours bound a claim, and the
 * claim's snapshot.
 */
const SAVED_LOCK_TIMEOUT = 'trpc_idempotency.saved_lock_timeout';
const SAVED_STATEMENT_TIMEOUT = 'trpc_idempotency.saved_statement_timeout';
const CLAIM_SNAPSHOT = 'trpc_idempotency.claim_snapshot';

/** Name of the savepoint a transaction-mode claim sets, so a stored error can drop the handler's writes. */
export const SAVEPOINT = 'trpc_idempotency_handler';

/** Columns every read of an existing row returns; `expires_in_ms`, `lease_left_ms` and `free` by the database clock. */
const ROW_COLUMNS = `status, fingerprint, path, response, token, xmin::text AS xmin,
  greatest(0, extract(epoch from (expires_at - clock_timestamp())) * 1000)::float8 AS expires_in_ms,
  greatest(0, extract(epoch from (locked_until - clock_timestamp())) * 1000)::float8 AS lease_left_ms,
  ${expiredAndFree('t')} AS free, current_setting('${CLAIM_SNAPSHOT}', true) AS claim_snapshot`;

const EXPIRES_MS = '(extract(epoch from k.expires_at) * 1000)::float8 AS expires_ms';

/**
 * What a completion sets: the result. The expiry stays the claim's (`ttl` counts from the claim), so the update
 * changes no indexed column and Postgres can write it in place (HOT: no new primary-key or expiry-index entries).
 * Only a handler that outlived `ttl` moves it, to `ttl` from now: a just-stored result must not be expired already.
 */
function stored(response: string, ttlMs: number): string {
  return storedSql(literal(response), int(ttlMs));
}

/** `stored` over SQL expressions (literals, or a prepared statement's parameters). */
function storedSql(response: string, ttlMs: string): string {
  return `status = 'done', response = ${response}, locked_until = NULL,
  expires_at = CASE WHEN expires_at > clock_timestamp() THEN expires_at ELSE ${fromNowSql(ttlMs)} END`;
}

/** The database clock `ms` milliseconds from now. */
function fromNow(ms: number): string {
  return fromNowSql(int(ms));
}

function fromNowSql(ms: string): string {
  return `clock_timestamp() + ${ms} * interval '1 millisecond'`;
}

/** Row `a` is expired and no live lease holds it: a new claim may take it over. */
function expiredAndFree(a: string): string {
  return (
    `(${a}.expires_at <= clock_timestamp() ` +
    `AND NOT (${a}.status = 'in_progress' AND ${a}.locked_until > clock_timestamp()))`
  );
}

/** Row `a` is a claim of the same payload whose holder's lease ran out: lease mode takes it over. */
function deadLease(a: string, fingerprint: string, path: string): string {
  return (
    `(${a}.status = 'in_progress' AND ${a}.locked_until <= clock_timestamp() ` +
    `AND ${a}.fingerprint = ${fingerprint} AND ${a}.path = ${path})`
  );
}

/**
 * A filter without columns, so Postgres evaluates it once, before the statement touches a row: it bounds how long
 * the statement may wait for a row lock. It first keeps the caller's lock_timeout aside (the RETURNING of an owning
 * claim puts it back, so `wait` never bounds the handler's own locks) and the statement's snapshot (what was
 * committed when the claim began: a row committed later was waited for). The nesting fixes the order.
 * `timeout` is the lock_timeout value as an SQL expression (a literal, or a prepared statement's parameter); 0 ms
 * becomes 1 ms (see `waitMs`): lock_timeout = 0 would mean "wait forever".
 */
function boundLockWaitSql(timeout: string): string {
  return (
    `set_config('lock_timeout', CASE WHEN set_config('${SAVED_LOCK_TIMEOUT}', ` +
    `${firstValue(SAVED_LOCK_TIMEOUT, "current_setting('lock_timeout')")}, true) IS NULL
    OR set_config('${CLAIM_SNAPSHOT}', ${firstValue(CLAIM_SNAPSHOT, 'pg_current_snapshot()::text')}` +
    `, true) IS NULL THEN NULL ELSE ${timeout} END, true) IS NOT NULL`
  );
}

/** The lock wait in whole milliseconds, at least 1. */
function waitMs(ms: number): string {
  return int(Math.max(1, ms));
}

/** The lock wait as a lock_timeout literal, for `boundLockWaitSql`. */
function waitLiteral(ms: number): string {
  return `'${waitMs(ms)}ms'`;
}

/**
 * The setting's value if this transaction already set it, else `value`. An UPDATE that waited for a row lock is
 * re-evaluated on the row's new version, filter included: the second run must not save our own lock_timeout as
 * the caller's (the RETURNING would then leave `wait` in force for the handler), nor move the claim's snapshot.
 * Outside its transaction a transaction-local setting reads as '' (or NULL if never set).
 */
function firstValue(setting: string, value: string): string {
  return `coalesce(nullif(current_setting('${setting}', true), ''), ${value})`;
}

const RESTORE_TIMEOUTS =
  `set_config('lock_timeout', current_setting('${SAVED_LOCK_TIMEOUT}'), true) ` +
  `AS lock_timeout_restored,
  set_config('statement_timeout', current_setting('${SAVED_STATEMENT_TIMEOUT}'), true) AS statement_timeout_restored`;

/**
 * Sent just before a bounded claim: keeps the caller's statement_timeout aside and sets the claim's, `timeout` (an
 * SQL expression: '0', or a prepared statement's parameter), so that only `wait` (lock_timeout) bounds the claim's
 * wait for a running original, however low the app set its statement_timeout. Postgres arms a statement's timeout
 * as the statement starts (each statement of a multi-statement text anew, since Postgres 13), so the claim cannot
 * lift it itself; the claim's RETURNING puts it back (RESTORE_TIMEOUTS) before the handler runs. A claim that finds
 * the key taken ends its transaction, and with it the setting.
 */
function liftStatementTimeoutSql(timeout: string): string {
  return (
    `SELECT set_config('statement_timeout', CASE WHEN set_config('${SAVED_STATEMENT_TIMEOUT}', ` +
    `current_setting('statement_timeout'), true) IS NULL THEN NULL ELSE ${timeout} END, true) ` +
    `AS statement_timeout_lifted`
  );
}

/** The claim's statement_timeout: none, its lock wait is bounded by lock_timeout. */
const NO_STATEMENT_TIMEOUT = "'0'";
const LIFT_STATEMENT_TIMEOUT = liftStatementTimeoutSql(NO_STATEMENT_TIMEOUT);

/**
 * The SQL text of every statement the modes run, with values embedded as escaped literals (see postgres-literal.ts:
 * this is what lets several statements share one round trip). Built once per table.
 *
 * A claim is the cheapest statement that decides ownership atomically: `INSERT … ON CONFLICT DO NOTHING RETURNING`.
 * Only when it returns nothing does a mode read the row, and only when that row has expired (or, in lease mode,
 * its holder died) does it send a takeover, an `UPDATE` whose condition Postgres re-checks on the row's latest
 * version. Small statements matter: every text travels over the simple protocol and is planned on every call,
 * and planning one CTE that did all three cost more than the insert itself.
 * Expiry and leases are judged with clock_timestamp(), never now(): inside a transaction now() is frozen.
 */
export class PostgresStatements implements Statements {
  readonly #t: string;
  /**
   * The completion, the claim and its lift, prepared once per connection on node-postgres (see
   * postgres-prepared-statements.ts); undefined elsewhere. The completion is defined first: a connection that has the
   * claim has it too.
   */
  readonly #prepared: PreparedStatements | undefined;
  readonly #completeName: string | undefined;
  readonly #claimName: string | undefined;
  readonly #liftName: string | undefined;

  /**
   * `counted`: the sessions that run the prepared completion read its row count with the COMMIT's answer (the pg fast
   * path), so it is the plain update; elsewhere (the general path's joined commit, whose driver hides row counts) it
   * is the guarded one (see `complete`).
   */
  constructor(table: TableName, prepared?: PreparedStatements, counted = false) {
    this.#t = table.qualified;
    this.#prepared = prepared;
    if (prepared) {
      const complete = this.#completeSql('$1', '$2', storedSql('$3', '$4'), !counted);
      this.#completeName = prepared.define('complete', ['text', 'text', 'text', 'float8'], complete);
      const claim = this.#claimSql(['$1', '$2', '$3', '$4'], '$5', "$6::text || 'ms'");
      this.#claimName = prepared.define('claim', ['text', 'text', 'text', 'text', 'float8', 'int'], claim);
      // Prepared too: planning it on every call cost about as much as the rest of the claim's text.
      this.#liftName = prepared.define('lift', ['text'], liftStatementTimeoutSql('$1'));
    }
  }

  /**
   * Transaction-mode claim: inserts the row as in_progress. A concurrent uncommitted claim of the same key makes
   * it wait until that one commits or rolls back (bounded by `lockTimeoutMs`, and by nothing else: see
   * LIFT_STATEMENT_TIMEOUT). The last statement returns `expires_ms` only when this call now owns the key; without
   * a row, read the row with `select`.
   */
  claimTransaction(v: ClaimValues, lockTimeoutMs?: number): string[] {
    const values = [literal(v.scope), literal(v.key), literal(v.fingerprint), literal(v.path)];
    if (lockTimeoutMs === undefined) return [this.#claimSql(values, int(v.ttlMs), undefined)];
    if (this.#prepared?.enabled) {
      return [
        `EXECUTE ${this.#liftName}(${NO_STATEMENT_TIMEOUT})`,
        `EXECUTE ${this.#claimName}(${values.join(', ')}, ${int(v.ttlMs)}, ${waitMs(lockTimeoutMs)})`,
      ];
    }
    return [LIFT_STATEMENT_TIMEOUT, this.#claimSql(values, int(v.ttlMs), waitLiteral(lockTimeoutMs))];
  }

  /** `claimTransaction` over SQL expressions; `timeout` (a lock_timeout value) bounds the wait when given. */
  #claimSql(values: readonly string[], ttlMs: string, timeout: string | undefined): string {
    return `INSERT INTO ${this.#t} AS k (scope, key, fingerprint, path, status, created_at, expires_at)
SELECT ${values.join(', ')}, 'in_progress',
  clock_timestamp(), ${fromNowSql(ttlMs)}${timeout !== undefined ? `\nWHERE ${boundLockWaitSql(timeout)}` : ''}
ON CONFLICT (scope, key) DO NOTHING
RETURNING ${EXPIRES_MS}${timeout !== undefined ? `, ${RESTORE_TIMEOUTS}` : ''}`;
  }

  /**
   * Transaction mode, after `claimTransaction` found an expired row: opens a new transaction's claim by taking the
   * row over if it still is expired and free (waiting, bounded, for a concurrent taker's transaction; Postgres
   * re-checks the condition on the row's latest version). The last statement returns `expires_ms` when this call
   * now owns the key.
   */
  takeOverTransaction(v: ClaimValues, lockTimeoutMs?: number): string[] {
    const bounded = lockTimeoutMs !== undefined;
    const update =
      `UPDATE ${this.#t} AS k SET fingerprint = ${literal(v.fingerprint)}, path = ${literal(v.path)},
  status = 'in_progress', token = NULL, locked_until = NULL, response = NULL,
  created_at = clock_timestamp(), expires_at = ${fromNow(v.ttlMs)}
WHERE k.scope = ${literal(v.scope)} AND k.key = ${literal(v.key)} ` +
      `AND ${expiredAndFree('k')}${bounded ? ` AND ${boundLockWaitSql(waitLiteral(lockTimeoutMs))}` : ''}
RETURNING ${EXPIRES_MS}${bounded ? `, ${RESTORE_TIMEOUTS}` : ''}`;
    return bounded ? [LIFT_STATEMENT_TIMEOUT, update] : [update];
  }

  /** Lease-mode claim (autocommit): inserts the row as in_progress with a lease and fencing token. */
  claimLease(v: LeaseClaim): string {
    return (
      `INSERT INTO ${this.#t} AS k (scope, key, fingerprint, path, status, ` +
      `token, locked_until, created_at, expires_at)
VALUES (${literal(v.scope)}, ${literal(v.key)}, ${literal(v.fingerprint)}, ` +
      `${literal(v.path)}, 'in_progress', ${literal(v.token)},
  ${fromNow(v.leaseMs)},
  clock_timestamp(), ${fromNow(v.ttlMs)})
ON CONFLICT (scope, key) DO NOTHING
RETURNING ${EXPIRES_MS}`
    );
  }

  /**
   * Lease mode (autocommit), after `claimLease` found the key taken: takes over an expired row, or a dead holder's
   * claim of the same payload whose lease ran out. An in_progress row is taken over only if the key's advisory lock
   * is free too (see `holdLease`): a lapsed lease alone may just mean starved renewals. The try-lock is released at
   * the end of this statement; the taker takes it again in its handler transaction. Returns `expires_ms` when this
   * call now owns the key.
   */
  takeOverLease(v: LeaseClaim): string {
    const fp = literal(v.fingerprint);
    const path = literal(v.path);
    return (
      `UPDATE ${this.#t} AS k SET fingerprint = ${fp}, path = ${path}, ` +
      `status = 'in_progress', token = ${literal(v.token)},
  locked_until = ${fromNow(v.leaseMs)}, response = NULL,
  created_at = clock_timestamp(), expires_at = ${fromNow(v.ttlMs)}
WHERE k.scope = ${literal(v.scope)} AND k.key = ${literal(v.key)} AND CASE WHEN k.status = 'in_progress'
  THEN CASE WHEN ${expiredAndFree('k')} OR ${deadLease('k', fp, path)} ` +
      `THEN pg_try_advisory_xact_lock(${this.#lockKey(literal(v.scope), literal(v.key))}) ELSE false END
  ELSE ${expiredAndFree('k')} END
RETURNING ${EXPIRES_MS}`
    );
  }

  /**
   * Lease mode, first in the holder's handler transaction: takes the key's transaction-level advisory lock if `token`
   * owns the row, then reads (with a snapshot taken after the lock) whether it still does. The lock lives as long as
   * the holder's transaction, so as long as its connection: `takeOverLease` never takes a live holder's claim over,
   * whatever its renewals do; a crashed holder's connection dies and frees it. The second statement's rows are
   * empty when another call took the key over before the lock was held: the handler must not run.
   */
  holdLease(r: LeaseOwner): string[] {
    return [
      `SELECT pg_advisory_xact_lock(${this.#lockKey(literal(r.scope), literal(r.key))})` +
        ` FROM ${this.#t} WHERE ${this.#owns(r)}`,
      `SELECT 1 AS owned FROM ${this.#t} WHERE ${this.#owns(r)}`,
    ];
  }

  /** Reads the row as it is now (a separate statement gets a fresh READ COMMITTED snapshot after a wait). */
  ranPrepared(claim: readonly Statement[]): boolean {
    return claim.some((statement) => typeof statement === 'string' && isExecute(statement));
  }

  /** The row's writer (`xmin`) was not yet committed for the claim's snapshot (see postgres-snapshot.ts). */
  waitedFor(row: Row): boolean {
    return typeof row.claim_snapshot === 'string' && !committedBefore(row.claim_snapshot, String(row.xmin));
  }

  select(r: RowKey): string {
    return (
      `SELECT ${ROW_COLUMNS} FROM ${this.#t} AS t ` +
      `WHERE t.scope = ${literal(r.scope)} AND t.key = ${literal(r.key)}`
    );
  }

  savepoint(): string {
    return `SAVEPOINT ${SAVEPOINT}`;
  }

  /**
   * Ends the handler's subtransaction before the completion, so the stored row is written by the top-level
   * transaction: a duplicate tells from the row's `xmin` whether it waited for it (see postgres-snapshot.ts).
   */
  releaseSavepoint(): string {
    return `RELEASE SAVEPOINT ${SAVEPOINT}`;
  }

  rollbackToSavepoint(): string {
    return `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`;
  }

  /**
   * Transaction mode: stores the result on the row this transaction claimed (its expiry: see `stored`). The row is
   * this call's claim only while it is in_progress with no lease token: a claim commits with its result, so no other
   * transaction's in_progress row without a token can be seen. It changes no row only when the handler deleted its
   * own key's row or marked it done, which the trust boundary leaves to the app (docs/reliability.md): the mode reads
   * the row count, which arrives with the answer of the COMMIT that shares its round trip, and records the failure
   * on the key then (modes/ended-transaction.ts), so nothing is checked on the way.
   *
   * `guarded`: where the session cannot report the row count (the general path's joined commit: Kysely's pg driver
   * returns nothing of a multi-statement text), the update is wrapped in a check that divides by zero (22012) unless
   * it changed the row, which aborts the transaction: the COMMIT that follows commits nothing.
   *
   * `prepared`: this transaction's claim was the prepared one, so its connection has the completion too (see the
   * constructor). A connection that lost it since (the handler's DEALLOCATE) fails here, 26000, and nothing commits.
   */
  complete(r: RowKey, response: string, ttlMs: number, prepared = false, guarded = false): string {
    if (prepared && this.#completeName) {
      return (
        `EXECUTE ${this.#completeName}(${literal(r.scope)}, ${literal(r.key)}, ` +
        `${literal(response)}, ${int(ttlMs)})`
      );
    }
    return this.#completeSql(literal(r.scope), literal(r.key), stored(response, ttlMs), guarded);
  }

  /** `complete` over SQL expressions: the key's scope and key, and what to set. */
  #completeSql(scope: string, key: string, set: string, guarded: boolean): string {
    const update = `UPDATE ${this.#t} SET ${set}
  WHERE scope = ${scope} AND key = ${key} AND status = 'in_progress' AND token IS NULL`;
    return guarded
      ? `WITH done AS (${update} RETURNING 1)\nSELECT 1 / (SELECT count(*)::int FROM done) AS completed`
      : update;
  }

  /**
   * Transaction mode, autocommit, after a completion that changed no row had committed (see `complete`): the handler
   * deleted or changed its own key's row, and its writes are in. Stores `response` (the error saying so) on the key,
   * so the key never runs again: a new row if it is gone, else over a row without a result and without a lease (a
   * claim another call holds now is waited for, and keeps the result it commits).
   */
  storeLostClaim(v: ClaimValues, response: string): string {
    return `INSERT INTO ${this.#t} AS k (scope, key, fingerprint, path, status, response, created_at, expires_at)
VALUES (${literal(v.scope)}, ${literal(v.key)}, ${literal(v.fingerprint)}, ${literal(v.path)}, 'done',
  ${literal(response)}, clock_timestamp(), ${fromNow(v.ttlMs)})
ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, path = excluded.path, status = 'done',
  token = NULL, locked_until = NULL, response = excluded.response, expires_at = excluded.expires_at
WHERE k.response IS NULL AND k.token IS NULL`;
  }

  /**
   * Lease mode: stores the result only while `token` still owns the row (a takeover, possible only once the holder's
   * connection and so its advisory lock were lost, changed it). When the owner was fenced off, no row matches and
   * the division by zero (22012) aborts the transaction, so the COMMIT that follows
   * in the same round trip cannot commit the stale owner's writes.
   */
  completeFenced(r: LeaseOwner, response: string, ttlMs: number): string {
    return `WITH done AS (UPDATE ${this.#t} SET ${stored(response, ttlMs)}
  WHERE ${this.#owns(r)} RETURNING 1)
SELECT 1 / (SELECT count(*)::int FROM done) AS still_owner`;
  }

  /**
   * Lease mode, autocommit: extends the leases of every listed owner that still holds its claim, in one statement
   * (one round trip per renewal tick however many calls run). A lapsed lease whose token still owns the row is
   * renewed: its holder's advisory lock kept it from being taken over. Returns the token of each renewed lease; a
   * missing one lost its claim.
   */
  renewLeases(owners: readonly (RowKey & { token: string; locked: boolean })[], leaseMs: number): string {
    const values = owners
      .map((o) => `(${literal(o.scope)}, ${literal(o.key)}, ${literal(o.token)}, ${o.locked ? 'true' : 'false'})`)
      .join(', ');
    // A holder whose transaction took the lock is renewed only while the lock is still held: once its connection
    // died the lease runs out and the key can be taken over, though this process still renews. One still waiting
    // for its transaction (no lock yet) is renewed as long as it asks.
    return `UPDATE ${this.#t} AS k SET locked_until = CASE WHEN NOT v.locked THEN ${fromNow(leaseMs)}
  WHEN pg_try_advisory_xact_lock(${this.#lockKey('k.scope', 'k.key')}) THEN k.locked_until ELSE ${fromNow(leaseMs)} END
FROM (VALUES ${values}) AS v(scope, key, token, locked)
WHERE k.scope = v.scope AND k.key = v.key AND k.token = v.token AND k.status = 'in_progress'
RETURNING k.token`;
  }

  /** Lease mode, autocommit: frees the key after a failure, if this owner still holds it. */
  releaseLease(r: LeaseOwner): string {
    return (
      `DELETE FROM ${this.#t}
WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)} ` +
      `AND token = ${literal(r.token)} AND status = 'in_progress'`
    );
  }

  /** Lease mode, autocommit: stores a deterministic error after the handler's transaction was rolled back. */
  storeErrorFenced(r: LeaseOwner, response: string, ttlMs: number): string {
    return `UPDATE ${this.#t} SET ${stored(response, ttlMs)}
WHERE ${this.#owns(r)}
RETURNING 1 AS stored`;
  }

  /**
   * The row is still `token`'s claim. Its lease may have lapsed (renewals starved of connections): while the holder's
   * transaction holds the key's advisory lock nobody can take it over, and a takeover changes the token.
   */
  #owns(r: LeaseOwner): string {
    return (
      `scope = ${literal(r.scope)} AND key = ${literal(r.key)} ` +
      `AND token = ${literal(r.token)} AND status = 'in_progress'`
    );
  }

  /**
   * The key's advisory lock: a 64-bit hash of (table, scope, key). Two keys whose hashes collide only make one wait
   * for the other's lock or answer 409 a while longer, never run twice: ownership is still decided by the row.
   */
  #lockKey(scope: string, key: string): string {
    return `hashtextextended(${literal(this.#t)} || chr(31) || ${scope} || chr(31) || ${key}, 0)`;
  }
}

/**
 * The general path's joined claim (see JoinedSession.beginClaim): fails with a division by zero unless this
 * transaction wrote the key's row, that is unless the claim or takeover just before it owns the key (a row written
 * by the transaction has its id as xmin; the claim runs before the savepoint, so under the top-level id).
 */
export function claimedCheck(table: TableName, r: RowKey): string {
  return `SELECT 1 / count(*)::int AS claimed FROM ${table.qualified}
WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)} AND xmin::text::bigint = txid_current() % 4294967296`;
}
