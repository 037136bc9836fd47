import type { Row } from '../../session.js';
import { int } from '../../sql-literal.js';
import type { ClaimValues, RowKey } from '../../statements.js';
import type { TableName } from '../../table-name.js';
import type { StatementSet } from '../dialect.js';
import { savepointSteps } from '../savepoint-steps.js';
import { fenced, plain, type Step, type StepConnection } from '../step.js';
import { hexBytes, hexText, lockWaitSeconds } from './mysql-literal.js';

/** The longest scope the table holds (VARBINARY(2048): with the 255-byte key, the primary key fits InnoDB's 3072). */
export const MAX_SCOPE_BYTES = 2048;

/**
 * The database clock in epoch milliseconds. UTC_TIMESTAMP, not NOW: converting the session's local time back to
 * epoch would be off by an hour around a DST change. Constant within one statement.
 */
export const NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/** What the statements need to know about the server, learned by the store before the first claim. */
export interface MysqlServer {
  /** MariaDB scopes a lock-wait timeout to one statement (`SET STATEMENT … FOR`); MySQL 8 needs SET SESSION. */
  mariadb: boolean;
}

/** What a completion sets: the result, and its expiry counted from now (a handler may outlast a short `ttl`). */
function stored(response: string, ttlMs: number): string {
  return `k.status = 'done', k.response = ${hexBytes(response)}, k.locked_until = NULL, k.expires_at = ${NOW_MS} + ${int(ttlMs)}`;
}

function expiredAndFree(a: string): string {
  return `(${a}.expires_at <= ${NOW_MS} AND NOT (${a}.status = 'in_progress' AND ${a}.locked_until > ${NOW_MS}))`;
}

/** MySQL's ER_DUP_ENTRY: the key is taken (by a committed row, or one we waited for until it committed). */
export function isDuplicateKey(error: unknown): boolean {
  return (error as { errno?: unknown })?.errno === 1062;
}

/**
 * MySQL / MariaDB statements (SQL that MySQL 8 accepts too). MySQL has no `INSERT … RETURNING`, so a claim is a
 * plain INSERT: it succeeds (this call owns the key) or fails with a duplicate-key error — after waiting, when the
 * key's row is another transaction's uncommitted claim, until that one commits or rolls back. Values travel as hex
 * literals (see mysql-literal.ts); time is epoch milliseconds by the database clock.
 */
export class MysqlStatements implements StatementSet {
  readonly #t: string;
  readonly #server: MysqlServer;

  constructor(table: TableName, server: MysqlServer) {
    const { schema, name } = table.parts;
    this.#t = schema ? `\`${schema}\`.\`${name}\`` : `\`${name}\``;
    this.#server = server;
  }

  claimTransaction(v: ClaimValues, lockTimeoutMs?: number): Step {
    const insert = `INSERT INTO ${this.#t} (scope, \`key\`, fingerprint, path, status, created_at, expires_at)
VALUES (${hexText(v.scope, MAX_SCOPE_BYTES)}, ${hexText(v.key)}, ${hexText(v.fingerprint)}, ${hexText(v.path)}, 'in_progress',
  ${NOW_MS}, ${NOW_MS} + ${int(v.ttlMs)})`;
    return this.#insertClaim(insert, v.ttlMs, lockTimeoutMs);
  }

  takeOverTransaction(v: ClaimValues, lockTimeoutMs?: number): Step {
    const update = `UPDATE ${this.#t} AS k SET k.fingerprint = ${hexText(v.fingerprint)}, k.path = ${hexText(v.path)},
  k.status = 'in_progress', k.token = NULL, k.locked_until = NULL, k.response = NULL,
  k.created_at = ${NOW_MS}, k.expires_at = ${NOW_MS} + ${int(v.ttlMs)}
WHERE ${this.#where('k', v)} AND ${expiredAndFree('k')}`;
    return this.#updateClaim(update, v.ttlMs, lockTimeoutMs);
  }

  claimLease(v: ClaimValues & { token: string; leaseMs: number }): Step {
    const insert = `INSERT INTO ${this.#t} (scope, \`key\`, fingerprint, path, status, token, locked_until, created_at, expires_at)
VALUES (${hexText(v.scope, MAX_SCOPE_BYTES)}, ${hexText(v.key)}, ${hexText(v.fingerprint)}, ${hexText(v.path)}, 'in_progress',
  ${hexText(v.token)}, ${NOW_MS} + ${int(v.leaseMs)}, ${NOW_MS}, ${NOW_MS} + ${int(v.ttlMs)})`;
    return this.#insertClaim(insert, v.ttlMs, undefined);
  }

  takeOverLease(v: ClaimValues & { token: string; leaseMs: number }): Step {
    const fp = hexText(v.fingerprint);
    const path = hexText(v.path);
    const update = `UPDATE ${this.#t} AS k SET k.fingerprint = ${fp}, k.path = ${path}, k.status = 'in_progress',
  k.token = ${hexText(v.token)}, k.locked_until = ${NOW_MS} + ${int(v.leaseMs)}, k.response = NULL,
  k.created_at = ${NOW_MS}, k.expires_at = ${NOW_MS} + ${int(v.ttlMs)}
WHERE ${this.#where('k', v)} AND (${expiredAndFree('k')}
  OR (k.status = 'in_progress' AND k.locked_until <= ${NOW_MS} AND k.fingerprint = ${fp} AND k.path = ${path}))`;
    return this.#updateClaim(update, v.ttlMs, undefined);
  }

  /** A plain read: under READ COMMITTED it sees what the original committed, even after our claim waited. */
  select(r: RowKey): Step {
    return plain(`SELECT t.status, t.fingerprint, t.path, t.response, t.token,
  GREATEST(0, t.expires_at - ${NOW_MS}) AS expires_in_ms,
  GREATEST(0, COALESCE(t.locked_until - ${NOW_MS}, 0)) AS lease_left_ms, ${expiredAndFree('t')} AS free
FROM ${this.#t} AS t WHERE ${this.#where('t', r)}`);
  }

  readonly savepoint = savepointSteps.savepoint;
  readonly releaseSavepoint = savepointSteps.releaseSavepoint;
  readonly rollbackToSavepoint = savepointSteps.rollbackToSavepoint;

  /** Transaction mode: stores the result on the row this transaction holds, kept `ttlMs` from now. */
  complete(r: RowKey, response: string, ttlMs: number): Step {
    return plain(`UPDATE ${this.#t} AS k SET ${stored(response, ttlMs)} WHERE ${this.#where('k', r)}`);
  }

  /** Changes no row when a takeover replaced the token: the step then throws and the commit never happens. */
  completeFenced(r: RowKey & { token: string }, response: string, ttlMs: number): Step {
    return fenced(`UPDATE ${this.#t} AS k SET ${stored(response, ttlMs)} WHERE ${this.#owner('k', r, false)}`);
  }

  /**
   * Extends the live leases of the listed owners; returns the token of each renewed one. MySQL has no RETURNING:
   * one UPDATE per owner, its affected rows saying whether it still held a live lease (a lapsed one is never revived).
   */
  renewLeases(owners: readonly (RowKey & { token: string })[], leaseMs: number): Step {
    const updates = owners.map(
      (o) =>
        [
          o.token,
          `UPDATE ${this.#t} AS k SET k.locked_until = ${NOW_MS} + ${int(leaseMs)} WHERE ${this.#owner('k', o, true)}`,
        ] as const,
    );
    return async (c) => {
      const renewed: Row[] = [];
      for (const [token, update] of updates) {
        if (Number((await c.query(update)).numAffectedRows ?? 0) > 0) renewed.push({ token });
      }
      return renewed;
    };
  }

  /**
   * First in the holder's handler transaction: whether `token` still owns the row. MySQL has no transaction-scoped
   * advisory lock, so the liveness of a holder is its renewals alone (see the README's dialect table); the first
   * step stands where Postgres takes its lock.
   */
  holdLease(r: RowKey & { token: string }): Step[] {
    return [async () => [], plain(`SELECT 1 AS owned FROM ${this.#t} AS k WHERE ${this.#owner('k', r, false)}`)];
  }

  releaseLease(r: RowKey & { token: string }): Step {
    return plain(`DELETE FROM ${this.#t} WHERE ${this.#owner(this.#t, r, false)}`);
  }

  storeErrorFenced(r: RowKey & { token: string }, response: string, ttlMs: number): Step {
    const update = `UPDATE ${this.#t} AS k SET ${stored(response, ttlMs)} WHERE ${this.#owner('k', r, false)}`;
    return async (c) => (Number((await c.query(update)).numAffectedRows ?? 0) > 0 ? [{ stored: 1 }] : []);
  }

  #where(a: string, r: RowKey): string {
    return `${a}.scope = ${hexText(r.scope, MAX_SCOPE_BYTES)} AND ${a}.\`key\` = ${hexText(r.key)}`;
  }

  /** The row is still `token`'s claim (and, with `liveLease`, its lease has not lapsed). */
  #owner(a: string, r: RowKey & { token: string }, liveLease: boolean): string {
    return `${this.#where(a, r)} AND ${a}.token = ${hexText(r.token)} AND ${a}.status = 'in_progress'${
      liveLease ? ` AND ${a}.locked_until > ${NOW_MS}` : ''
    }`;
  }

  /**
   * An INSERT that owns the key or finds it taken. MySQL answers no RETURNING: the expiry the replay cache keeps is
   * counted on this process's clock, which the cache compares it with anyway.
   */
  #insertClaim(insert: string, ttlMs: number, lockTimeoutMs: number | undefined): Step {
    const step: Step = async (c) => {
      try {
        await this.#bounded(c, insert, lockTimeoutMs);
      } catch (error) {
        if (isDuplicateKey(error)) return [];
        throw error;
      }
      return [{ expires_ms: Date.now() + ttlMs }];
    };
    return step;
  }

  /** A takeover UPDATE owns the key when it changed the row (its condition held on the latest committed version). */
  #updateClaim(update: string, ttlMs: number, lockTimeoutMs: number | undefined): Step {
    return async (c) => {
      const changed = Number((await this.#bounded(c, update, lockTimeoutMs)).numAffectedRows ?? 0);
      return changed > 0 ? [{ expires_ms: Date.now() + ttlMs }] : [];
    };
  }

  /**
   * Runs `statement` with its lock wait bounded by `ms`: on MariaDB within the statement (`SET STATEMENT … FOR`),
   * on MySQL 8 by setting the session's timeout around it (MySQL's minimum is 1 s) and putting the old one back,
   * so `wait` never bounds the handler's own locks.
   */
  async #bounded(c: StepConnection, statement: string, ms: number | undefined) {
    if (ms === undefined) return c.query(statement);
    if (this.#server.mariadb) {
      return c.query(`SET STATEMENT innodb_lock_wait_timeout = ${lockWaitSeconds(ms)} FOR ${statement}`);
    }
    const seconds = lockWaitSeconds(Math.max(ms, 1));
    await c.query(
      `SET @trpc_idempotency_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = ${seconds}`,
    );
    try {
      return await c.query(statement);
    } finally {
      await c.query('SET SESSION innodb_lock_wait_timeout = @trpc_idempotency_lock_wait');
    }
  }
}
