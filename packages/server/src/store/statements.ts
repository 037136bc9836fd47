import { int, literal } from './sql-literal.js';
import type { TableName } from './table-name.js';

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

/** A transaction-local setting that keeps the caller's lock_timeout while the claim bounds its own wait. */
const SAVED_LOCK_TIMEOUT = 'trpc_idempotency.saved_lock_timeout';

/** Name of the savepoint a transaction-mode claim sets, so a stored error can drop the handler's writes. */
export const SAVEPOINT = 'trpc_idempotency_handler';

/** Columns every read of an existing row returns; `expires_ms` and `lease_left_ms` computed by the database clock. */
const ROW_COLUMNS = `status, fingerprint, path, response, token,
  (extract(epoch from expires_at) * 1000)::float8 AS expires_ms,
  greatest(0, extract(epoch from (locked_until - clock_timestamp())) * 1000)::float8 AS lease_left_ms`;

/** Row `a` is expired and no live lease holds it: a new claim may take it over. */
function expiredAndFree(a: string): string {
  return `(${a}.expires_at <= clock_timestamp() AND NOT (${a}.status = 'in_progress' AND ${a}.locked_until > clock_timestamp()))`;
}

/** Row `a` is a claim of the same payload whose holder's lease ran out: lease mode takes it over. */
function deadLease(a: string, fingerprint: string, path: string): string {
  return `(${a}.status = 'in_progress' AND ${a}.locked_until <= clock_timestamp() AND ${a}.fingerprint = ${fingerprint} AND ${a}.path = ${path})`;
}

/**
 * The SQL text of every statement the modes run, with values embedded as escaped literals (see sql-literal.ts:
 * this is what lets several statements share one round trip). Built once per table.
 * Expiry and leases are judged with clock_timestamp(), never now(): inside a transaction now() is frozen.
 */
export class Statements {
  readonly #t: string;

  constructor(table: TableName) {
    this.#t = table.qualified;
  }

  /**
   * Transaction-mode claim: inserts the row as in_progress, or takes over an expired one. A concurrent uncommitted
   * claim of the same key makes this wait until it commits or rolls back. Returns a row only when this call now
   * owns the key.
   *
   * Always returns one row: `expires_ms` is set when this call now owns the key; `seen_rows` = 0 with no claim
   * means the row appeared while this statement ran, i.e. it waited for a concurrent original.
   *
   * A committed row that cannot be taken over (a completed, live key: the replay case) is seen first and the
   * insert is skipped: no row lock, no transaction id, nothing to write.
   *
   * With `lockTimeoutMs`, the wait is bounded inside the same statement (no extra round trip): the filter sets
   * lock_timeout for the transaction, keeping the previous value aside, before the row is inserted; RETURNING,
   * evaluated after the insert, puts the previous value back, so `wait` never bounds the handler's own locks.
   * 0 ms becomes 1 ms: lock_timeout = 0 would mean "wait forever".
   */
  claimTransaction(v: ClaimValues, lockTimeoutMs?: number): string {
    const bounded = lockTimeoutMs !== undefined;
    const gate = bounded
      ? `\n  AND set_config('lock_timeout', CASE WHEN set_config('${SAVED_LOCK_TIMEOUT}', current_setting('lock_timeout'), true) IS NULL THEN NULL ELSE '${int(Math.max(1, lockTimeoutMs))}ms' END, true) IS NOT NULL`
      : '';
    const restore = bounded
      ? `, set_config('lock_timeout', current_setting('${SAVED_LOCK_TIMEOUT}'), true) AS lock_timeout_restored`
      : '';
    const s = literal(v.scope);
    const k = literal(v.key);
    return `WITH seen AS (SELECT ${expiredAndFree('x')} AS free FROM ${this.#t} AS x WHERE x.scope = ${s} AND x.key = ${k}),
claimed AS (INSERT INTO ${this.#t} AS k (scope, key, fingerprint, path, status, created_at, expires_at)
SELECT ${s}, ${k}, ${literal(v.fingerprint)}, ${literal(v.path)}, 'in_progress',
  clock_timestamp(), clock_timestamp() + ${int(v.ttlMs)} * interval '1 millisecond'
WHERE NOT EXISTS (SELECT 1 FROM seen WHERE NOT seen.free)${gate}
ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, path = excluded.path,
  status = 'in_progress', token = NULL, locked_until = NULL, response = NULL,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE ${expiredAndFree('k')}
RETURNING (extract(epoch from k.expires_at) * 1000)::float8 AS expires_ms${restore})
SELECT claimed.expires_ms, (SELECT count(*) FROM seen)::int AS seen_rows FROM (SELECT 1) AS one LEFT JOIN claimed ON true`;
  }

  /**
   * Lease-mode claim (autocommit): inserts the row as in_progress with a lease and fencing token, takes over an
   * expired row, or takes over a dead holder's claim of the same payload whose lease ran out. `prev_status` tells
   * a takeover apart from a fresh claim. As above, a visible row that cannot be taken over (a completed key, a live
   * lease: replays and polls) skips the insert, so it is never locked.
   */
  claimLease(v: ClaimValues & { token: string; leaseMs: number }): string {
    const s = literal(v.scope);
    const k = literal(v.key);
    const fp = literal(v.fingerprint);
    const path = literal(v.path);
    return `WITH prev AS (
  SELECT x.status, ${expiredAndFree('x')} OR ${deadLease('x', fp, path)} AS free
  FROM ${this.#t} AS x WHERE x.scope = ${s} AND x.key = ${k})
INSERT INTO ${this.#t} AS k (scope, key, fingerprint, path, status, token, locked_until, created_at, expires_at)
SELECT ${s}, ${k}, ${fp}, ${path}, 'in_progress', ${literal(v.token)},
  clock_timestamp() + ${int(v.leaseMs)} * interval '1 millisecond',
  clock_timestamp(), clock_timestamp() + ${int(v.ttlMs)} * interval '1 millisecond'
WHERE NOT EXISTS (SELECT 1 FROM prev WHERE NOT prev.free)
ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, path = excluded.path,
  status = 'in_progress', token = excluded.token, locked_until = excluded.locked_until, response = NULL,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE ${expiredAndFree('k')} OR ${deadLease('k', 'excluded.fingerprint', 'excluded.path')}
RETURNING (SELECT status FROM prev) AS prev_status, (extract(epoch from k.expires_at) * 1000)::float8 AS expires_ms`;
  }

  /** Reads the row as it is now (a separate statement gets a fresh READ COMMITTED snapshot after a wait). */
  select(r: RowKey): string {
    return `SELECT ${ROW_COLUMNS} FROM ${this.#t} WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)}`;
  }

  savepoint(): string {
    return `SAVEPOINT ${SAVEPOINT}`;
  }

  rollbackToSavepoint(): string {
    return `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`;
  }

  /** Transaction mode: stores the result on the row this transaction holds. */
  complete(r: RowKey, response: string): string {
    return `UPDATE ${this.#t} SET status = 'done', response = ${literal(response)}, locked_until = NULL
WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)}`;
  }

  /**
   * Lease mode: stores the result only while `token` still owns the row. When a takeover has fenced this owner
   * off, no row matches and the division by zero (22012) aborts the transaction, so the COMMIT that follows in the
   * same round trip cannot commit the stale owner's writes.
   */
  completeFenced(r: RowKey & { token: string }, response: string): string {
    return `WITH done AS (UPDATE ${this.#t} SET status = 'done', response = ${literal(response)}, locked_until = NULL
  WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)} AND token = ${literal(r.token)}
    AND status = 'in_progress' RETURNING 1)
SELECT 1 / (SELECT count(*)::int FROM done) AS still_owner`;
  }

  /** Lease mode, autocommit: extends the lease while the owner's handler runs. */
  renewLease(r: RowKey & { token: string; leaseMs: number }): string {
    return `UPDATE ${this.#t} SET locked_until = clock_timestamp() + ${int(r.leaseMs)} * interval '1 millisecond'
WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)} AND token = ${literal(r.token)} AND status = 'in_progress'`;
  }

  /** Lease mode, autocommit: frees the key after a failure, if this owner still holds it. */
  releaseLease(r: RowKey & { token: string }): string {
    return `DELETE FROM ${this.#t}
WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)} AND token = ${literal(r.token)} AND status = 'in_progress'`;
  }

  /** Lease mode, autocommit: stores a deterministic error after the handler's transaction was rolled back. */
  storeErrorFenced(r: RowKey & { token: string }, response: string): string {
    return `UPDATE ${this.#t} SET status = 'done', response = ${literal(response)}, locked_until = NULL
WHERE scope = ${literal(r.scope)} AND key = ${literal(r.key)} AND token = ${literal(r.token)} AND status = 'in_progress'
RETURNING 1 AS stored`;
  }
}
