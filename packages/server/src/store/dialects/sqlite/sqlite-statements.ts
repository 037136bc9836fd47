import { savepointSteps } from '../../connection/savepoint-steps.js';
import { completing, fenced, plain } from '../../connection/step.js';
import { int } from '../../sql-int.js';
import type { TableName } from '../../table-name.js';
import type { ClaimValues, LeaseClaim, LeaseOwner, RowKey, Statements, Step } from '../dialect.js';

/** The database clock in epoch milliseconds (julianday works on every SQLite; 'now' is constant per statement). */
export const NOW_MS = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

function expiredAndFree(a: string): string {
  return `(${a}.expires_at <= ${NOW_MS} AND NOT (${a}.status = 'in_progress' AND ${a}.locked_until > ${NOW_MS}))`;
}

/** Refuses NUL in a scope, key or path, as Postgres does, so every dialect accepts the same values. */
function text(value: string): string {
  if (value.includes('\u0000')) {
    throw new TypeError('idempotency: a scope, key or path must not contain the NUL character');
  }
  return value;
}

/** The quoted table name, `"schema"."name"` for an attached database. */
export function sqliteTable(table: TableName): string {
  const { schema, name } = table.parts;
  return schema ? `"${schema}"."${name}"` : `"${name}"`;
}

/**
 * SQLite statements (3.35+: RETURNING). Every transaction of ours starts with BEGIN IMMEDIATE, so the claim runs
 * while this connection holds the database's write lock: no other writer can hold an uncommitted claim of the
 * key, and `INSERT … ON CONFLICT DO NOTHING RETURNING` decides ownership alone. Values are bound parameters;
 * TEXT compares with the BINARY collation (byte-exact); time is epoch milliseconds.
 */
export class SqliteStatements implements Statements {
  readonly #t: string;

  constructor(table: TableName) {
    this.#t = sqliteTable(table);
  }

  claimTransaction(v: ClaimValues, lockTimeoutMs?: number): Step[] {
    return [
      withWait(
        plain(
          `INSERT INTO ${this.#t} (scope, key, fingerprint, path, status, created_at, expires_at)
VALUES (?, ?, ?, ?, 'in_progress', ${NOW_MS}, ${NOW_MS} + ${int(v.ttlMs)})
ON CONFLICT (scope, key) DO NOTHING RETURNING expires_at AS expires_ms`,
          [text(v.scope), text(v.key), v.fingerprint, text(v.path)],
        ),
        lockTimeoutMs,
      ),
    ];
  }

  takeOverTransaction(v: ClaimValues, lockTimeoutMs?: number): Step[] {
    return [
      withWait(
        plain(
          `UPDATE ${this.#t} AS k SET fingerprint = ?, path = ?, status = 'in_progress', ` +
            `token = NULL, locked_until = NULL,
  response = NULL, created_at = ${NOW_MS}, expires_at = ${NOW_MS} + ${int(v.ttlMs)}
WHERE k.scope = ? AND k.key = ? AND ${expiredAndFree('k')} RETURNING expires_at AS expires_ms`,
          [v.fingerprint, text(v.path), text(v.scope), text(v.key)],
        ),
        lockTimeoutMs,
      ),
    ];
  }

  /** `deadline` (the call's, performance.now() ms) bounds the wait for the write lock: `wait`, not more. */
  claimLease(v: LeaseClaim & { deadline?: number }): Step {
    return untilDeadline(
      plain(
        `INSERT INTO ${this.#t} (scope, key, fingerprint, path, status, token, locked_until, created_at, expires_at)
VALUES (?, ?, ?, ?, 'in_progress', ?, ${NOW_MS} + ${int(v.leaseMs)}, ${NOW_MS}, ${NOW_MS} + ${int(v.ttlMs)})
ON CONFLICT (scope, key) DO NOTHING RETURNING expires_at AS expires_ms`,
        [text(v.scope), text(v.key), v.fingerprint, text(v.path), v.token],
      ),
      v.deadline,
    );
  }

  takeOverLease(v: LeaseClaim & { deadline?: number }): Step {
    return untilDeadline(
      plain(
        `UPDATE ${this.#t} AS k SET fingerprint = ?, path = ?, status = 'in_progress', token = ?,
  locked_until = ${NOW_MS} + ${int(v.leaseMs)}, response = NULL,
  created_at = ${NOW_MS}, expires_at = ${NOW_MS} + ${int(v.ttlMs)}
WHERE k.scope = ? AND k.key = ? AND (${expiredAndFree('k')}
  OR (k.status = 'in_progress' AND k.locked_until <= ${NOW_MS} AND k.fingerprint = ? AND k.path = ?))
RETURNING expires_at AS expires_ms`,
        [v.fingerprint, text(v.path), v.token, text(v.scope), text(v.key), v.fingerprint, text(v.path)],
      ),
      v.deadline,
    );
  }

  /** A duplicate's read passes its call's `deadline`: it waits for the write lock no longer than its `wait`. */
  select(r: RowKey & { deadline?: number }): Step {
    return untilDeadline(
      plain(
        `SELECT t.status, t.fingerprint, t.path, t.response, t.token, max(0, t.expires_at - ${NOW_MS}) AS expires_in_ms,
  max(0, coalesce(t.locked_until - ${NOW_MS}, 0)) AS lease_left_ms, ${expiredAndFree('t')} AS free
FROM ${this.#t} AS t WHERE t.scope = ? AND t.key = ?`,
        [text(r.scope), text(r.key)],
      ),
      r.deadline,
    );
  }

  readonly savepoint = savepointSteps.savepoint;
  readonly releaseSavepoint = savepointSteps.releaseSavepoint;
  readonly rollbackToSavepoint = savepointSteps.rollbackToSavepoint;

  /**
   * Transaction mode: stores the result on the row this transaction claimed, kept `ttlMs` from now. Changes no row
   * when the handler deleted the row or marked it done: the step then throws and the commit never happens.
   */
  complete(r: RowKey, response: string, ttlMs: number): Step {
    return completing(
      `UPDATE ${this.#t} SET ${stored(ttlMs)} WHERE scope = ? AND key = ? AND status = 'in_progress' AND token IS NULL`,
      [response, text(r.scope), text(r.key)],
    );
  }

  /** Changes no row when a takeover replaced the token: the step then throws. */
  completeFenced(r: LeaseOwner, response: string, ttlMs: number): Step {
    return fenced(`UPDATE ${this.#t} SET ${stored(ttlMs)} WHERE ${owns(false)}`, [response, ...ownerValues(r)]);
  }

  /**
   * Extends the leases of the listed owners that still hold their claims, in one statement; returns the token of each
   * renewed one. A lapsed lease whose token still owns the row is renewed too: nobody took it over (a takeover
   * replaces the token), its holder just could not renew sooner (the write lock was busy). Only a missing token tells
   * a holder it lost its claim: a late renewal must never make a live holder give up a key whose handler ran.
   */
  renewLeases(owners: readonly LeaseOwner[], leaseMs: number): Step {
    const values = owners.map(() => '(?, ?, ?)').join(', ');
    return plain(
      `UPDATE ${this.#t} SET locked_until = ${NOW_MS} + ${int(leaseMs)}
WHERE (scope, key, token) IN (VALUES ${values}) AND status = 'in_progress'
RETURNING token`,
      owners.flatMap((o) => ownerValues(o)),
    );
  }

  /**
   * First in the holder's handler transaction: whether `token` still owns the row. The holder's BEGIN IMMEDIATE holds
   * the file's write lock, so no takeover can happen while it runs; the first step stands where Postgres takes its
   * lock.
   */
  holdLease(r: LeaseOwner): Step[] {
    return [async () => [], plain(`SELECT 1 AS owned FROM ${this.#t} WHERE ${owns(false)}`, ownerValues(r))];
  }

  releaseLease(r: LeaseOwner): Step {
    return plain(`DELETE FROM ${this.#t} WHERE ${owns(false)}`, ownerValues(r));
  }

  storeErrorFenced(r: LeaseOwner, response: string, ttlMs: number): Step {
    return plain(`UPDATE ${this.#t} SET ${stored(ttlMs)} WHERE ${owns(false)} RETURNING 1 AS stored`, [
      response,
      ...ownerValues(r),
    ]);
  }
}

/**
 * What a completion sets (the response is the first parameter). The expiry stays the claim's (`ttl` counts from
 * the claim); only a handler that outlived `ttl` moves it to `ttl` from now, so a just-stored result is never expired.
 */
function stored(ttlMs: number): string {
  return `status = 'done', response = ?, locked_until = NULL,
  expires_at = CASE WHEN expires_at > ${NOW_MS} THEN expires_at ELSE ${NOW_MS} + ${int(ttlMs)} END`;
}

/** The row is still the owner's claim (and, with `liveLease`, its lease has not lapsed): scope, key, token follow. */
function owns(liveLease: boolean): string {
  return (
    `scope = ? AND key = ? AND token = ? ` +
    `AND status = 'in_progress'${liveLease ? ` AND locked_until > ${NOW_MS}` : ''}`
  );
}

function ownerValues(r: LeaseOwner): unknown[] {
  return [text(r.scope), text(r.key), r.token];
}

/** Bounds `step`'s wait for the write lock by what is left until `deadline` (performance.now() ms), if given. */
function untilDeadline(step: Step, deadline: number | undefined): Step {
  return withWait(step, deadline === undefined ? undefined : Math.max(0, Math.ceil(deadline - performance.now())));
}

function withWait(step: Step, lockWaitMs: number | undefined): Step {
  if (lockWaitMs !== undefined) step.lockWaitMs = lockWaitMs;
  return step;
}
