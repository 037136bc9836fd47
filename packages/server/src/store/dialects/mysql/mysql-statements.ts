/*
 * Over 300 lines on purpose: every statement of the Statements contract for MySQL / MariaDB in one file, method by
 * method beside postgres-statements.ts, with the named-lock helpers the lease statements share.
 */

import { savepointSteps } from '../../connection/savepoint-steps.js';
import { completing, fenced, plain } from '../../connection/step.js';
import { int } from '../../sql-int.js';
import type { TableName } from '../../table-name.js';
import {
  type ClaimValues,
  type LeaseClaim,
  type LeaseOwner,
  MAX_SCOPE_BYTES,
  type Row,
  type RowKey,
  type Statements,
  type Step,
  type StepConnection,
} from '../dialect.js';
import { isDuplicateKey } from './mysql-errors.js';
import { hexBytes, hexText, lockWaitSeconds } from './mysql-literal.js';

/**
 * The database clock in epoch milliseconds. UTC_TIMESTAMP, not NOW: converting the session's local time back to
 * epoch would be off by an hour around a DST change. Constant within one statement.
 */
export const NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/**
 * Seconds a handler's transaction waits for its key's lease lock (holdLease) while its token owns the row. Only a
 * taker trying the lock (for one statement and its commit) or the key's previous owner ending its transaction hold
 * it then; a longer wait means the key was taken over meanwhile, which the ownership read that follows would say.
 */
const HOLD_LOCK_WAIT_S = 10;

/**
 * Frees the lease lock `name` (an SQL expression) if this connection holds it, as often as it took it: GET_LOCK
 * counts, and a takeover's condition may be evaluated twice (once more after waiting for the row's lock). One round
 * trip when it was taken once (or not at all: RELEASE_LOCK then answers NULL, or 0 if another connection holds it).
 */
function releaseLock(name: string): Step {
  const release =
    `SELECT RELEASE_LOCK(${name}) AS released, ` + `COALESCE(IS_USED_LOCK(${name}) = CONNECTION_ID(), 0) AS still_ours`;
  return async (c) => {
    while (Number((await c.query(release)).rows[0]?.still_ours) === 1) {}
    return [];
  };
}

/** What the statements need to know about the server, learned by the store before the first claim. */
export interface MysqlServer {
  /** MariaDB scopes a lock-wait timeout to one statement (`SET STATEMENT … FOR`); MySQL 8 needs SET SESSION. */
  mariadb: boolean;
}

/**
 * What a completion sets: the result. The expiry stays the claim's (`ttl` counts from the claim); only a handler
 * that outlived `ttl` moves it to `ttl` from now, so a just-stored result is never expired already.
 */
function stored(response: string, ttlMs: number): string {
  return `k.status = 'done', k.response = ${hexBytes(response)}, k.locked_until = NULL,
  k.expires_at = CASE WHEN k.expires_at > ${NOW_MS} THEN k.expires_at ELSE ${NOW_MS} + ${int(ttlMs)} END`;
}

function expiredAndFree(a: string): string {
  return `(${a}.expires_at <= ${NOW_MS} AND NOT (${a}.status = 'in_progress' AND ${a}.locked_until > ${NOW_MS}))`;
}

/**
 * MySQL / MariaDB statements (SQL that MySQL 8 accepts too). MySQL has no `INSERT … RETURNING`, so a claim is a
 * plain INSERT: it succeeds (this call owns the key) or fails with a duplicate-key error — after waiting, when the
 * key's row is another transaction's uncommitted claim, until that one commits or rolls back. Values travel as hex
 * literals (see mysql-literal.ts); time is epoch milliseconds by the database clock.
 */
export class MysqlStatements implements Statements {
  readonly #t: string;
  /** The table as the lease lock's name says it: named locks are server-wide, so the database is part of it. */
  readonly #lockTable: string;
  readonly #server: MysqlServer;
  /** The lease locks each held connection frees when it is given back (a checkout's connection is a new object). */
  readonly #releasing = new WeakMap<StepConnection, Set<string>>();
  /** The lease locks each held connection took in a claim that inserted its row: holdLease has nothing to check. */
  readonly #claimedWithLock = new WeakMap<StepConnection, string>();

  constructor(table: TableName, server: MysqlServer) {
    const { schema, name } = table.parts;
    this.#t = schema ? `\`${schema}\`.\`${name}\`` : `\`${name}\``;
    this.#lockTable = `CONCAT(${schema ? `'${schema}'` : "COALESCE(DATABASE(), '')"}, '.${name}')`;
    this.#server = server;
  }

  claimTransaction(v: ClaimValues, lockTimeoutMs?: number): Step[] {
    const insert =
      `INSERT INTO ${this.#t} (scope, \`key\`, fingerprint, path, status, created_at, expires_at)
VALUES (${hexText(v.scope, MAX_SCOPE_BYTES)}, ${hexText(v.key)}, ${hexText(v.fingerprint)}, ` +
      `${hexText(v.path)}, 'in_progress',
  ${NOW_MS}, ${NOW_MS} + ${int(v.ttlMs)})`;
    return [this.#insertClaim(insert, v.ttlMs, lockTimeoutMs)];
  }

  takeOverTransaction(v: ClaimValues, lockTimeoutMs?: number): Step[] {
    const update = `UPDATE ${this.#t} AS k SET k.fingerprint = ${hexText(v.fingerprint)}, k.path = ${hexText(v.path)},
  k.status = 'in_progress', k.token = NULL, k.locked_until = NULL, k.response = NULL,
  k.created_at = ${NOW_MS}, k.expires_at = ${NOW_MS} + ${int(v.ttlMs)}
WHERE ${this.#where('k', v)} AND ${expiredAndFree('k')}`;
    return [this.#updateClaim(update, v.ttlMs, lockTimeoutMs)];
  }

  /**
   * Inserts the claim only if the key's lease lock is free: taken in the INSERT's own SELECT (no wait), so the claim
   * and its lock come in one statement. A busy lock means the key has a live holder (or a taker or a finishing owner
   * holds it for a moment): nothing is inserted, the claim reports the key taken and the caller reads the row. The
   * lock stays on this connection, which runs the handler's transaction next (MysqlStore.commitThenBegin): a claim is
   * never without its lock, so no taker gets past it while the holder lives, even while the holder waits for pooled
   * connections before its handler runs; the handler's transaction need not check it again (holdLease). Freed when
   * the connection is given back (also after a duplicate-key loss).
   */
  claimLease(v: LeaseClaim): Step {
    const lock = this.leaseLockName(v);
    const insert =
      `INSERT INTO ${this.#t} (scope, \`key\`, fingerprint, path, status, ` +
      `token, locked_until, created_at, expires_at)
SELECT ${hexText(v.scope, MAX_SCOPE_BYTES)}, ${hexText(v.key)}, ${hexText(v.fingerprint)}, ` +
      `${hexText(v.path)}, 'in_progress',
  ${hexText(v.token)}, ${NOW_MS} + ${int(v.leaseMs)}, ${NOW_MS}, ${NOW_MS} + ${int(v.ttlMs)}
FROM DUAL WHERE GET_LOCK(${lock}, 0) = 1`;
    return async (c) => {
      // Registered first: a duplicate-key error after GET_LOCK still frees it.
      this.#freeOnRelease(c, lock);
      try {
        const inserted = Number((await c.query(insert)).numAffectedRows ?? 0) > 0;
        if (!inserted) return [];
        this.#claimedWithLock.set(c, lock);
        return [{ expires_ms: Date.now() + v.ttlMs }];
      } catch (error) {
        if (isDuplicateKey(error)) return [];
        throw error;
      }
    };
  }

  /**
   * Takes over an expired row, or a dead holder's claim of the same payload whose lease ran out. An in_progress row is
   * taken over only if the key's lease lock is free too, tried (GET_LOCK with no wait) under the row lock this UPDATE
   * holds: a live holder's handler connection holds it (see holdLease), however starved its renewals. The taker keeps
   * the lock until its UPDATE has committed (it runs in autocommit), so a holder that was only now getting the lock
   * waits for the commit and then reads that it lost the key; the lock is released before the connection goes back.
   */
  takeOverLease(v: LeaseClaim): Step {
    const fp = hexText(v.fingerprint);
    const path = hexText(v.path);
    const lock = this.leaseLockName(v);
    // CASE, not AND: MySQL promises no order for AND's operands, and GET_LOCK must run only for a takeable claim.
    const update = `UPDATE ${this.#t} AS k SET k.fingerprint = ${fp}, k.path = ${path}, k.status = 'in_progress',
  k.token = ${hexText(v.token)}, k.locked_until = ${NOW_MS} + ${int(v.leaseMs)}, k.response = NULL,
  k.created_at = ${NOW_MS}, k.expires_at = ${NOW_MS} + ${int(v.ttlMs)}
WHERE ${this.#where('k', v)} AND CASE WHEN k.status = 'in_progress'
  THEN CASE WHEN ${expiredAndFree('k')} OR (k.locked_until <= ${NOW_MS} AND k.fingerprint = ${fp} AND k.path = ${path})
    THEN GET_LOCK(${lock}, 0) = 1 ELSE FALSE END
  ELSE ${expiredAndFree('k')} END`;
    const claim = this.#updateClaim(update, v.ttlMs, undefined);
    return async (c) => {
      // Registered first: a failure after GET_LOCK still frees it.
      this.#freeOnRelease(c, lock);
      return claim(c);
    };
  }

  /**
   * A plain read. In transaction mode it is its transaction's first consistent read (the claim before it, an INSERT or
   * a takeover's UPDATE, takes no snapshot), so its snapshot is taken now, after our claim waited: it sees what the
   * original committed, also under REPEATABLE READ. Lease mode reads in autocommit.
   */
  select(r: RowKey): Step {
    return plain(`SELECT t.status, t.fingerprint, t.path, t.response, t.token,
  GREATEST(0, t.expires_at - ${NOW_MS}) AS expires_in_ms,
  GREATEST(0, COALESCE(t.locked_until - ${NOW_MS}, 0)) AS lease_left_ms, ${expiredAndFree('t')} AS free
FROM ${this.#t} AS t WHERE ${this.#where('t', r)}`);
  }

  readonly savepoint = savepointSteps.savepoint;
  readonly releaseSavepoint = savepointSteps.releaseSavepoint;
  readonly rollbackToSavepoint = savepointSteps.rollbackToSavepoint;

  /**
   * Transaction mode: stores the result on the row this transaction claimed, kept `ttlMs` from now. Changes no row
   * when the handler deleted the row or marked it done: the step then throws and the commit never happens.
   */
  complete(r: RowKey, response: string, ttlMs: number): Step {
    // MariaDB: only inside a transaction. Once the handler's own SQL committed ours, the claim's row is committed
    // in_progress and the UPDATE would store the result apart, in autocommit: it fails instead, and the call says why
    // (modes/ended-transaction.ts). MySQL 8 has no such variable (docs/reliability.md, "Trust boundary").
    return completing(
      `UPDATE ${this.#t} AS k SET ${stored(response, ttlMs)}
WHERE ${this.#where('k', r)} AND k.status = 'in_progress' ` +
        `AND k.token IS NULL${this.#server.mariadb ? ' AND @@in_transaction = 1' : ''}`,
    );
  }

  /** Changes no row when a takeover replaced the token: the step then throws and the commit never happens. */
  completeFenced(r: LeaseOwner, response: string, ttlMs: number): Step {
    return fenced(`UPDATE ${this.#t} AS k SET ${stored(response, ttlMs)} WHERE ${this.#owner('k', r, false)}`);
  }

  /**
   * Extends the leases of the listed owners; returns the token of each renewed one. MySQL has no RETURNING: one
   * UPDATE per owner, its affected rows saying whether it was renewed. A holder whose handler's transaction holds the
   * key's lease lock is renewed while that lock is held, also after its lease lapsed (nobody could take it over
   * meanwhile); once its connection died the lock is free, the lease is left to run out and the holder is told.
   * One still waiting for its transaction (no lock yet) is renewed only while its lease is live.
   */
  renewLeases(owners: readonly (RowKey & { token: string; locked: boolean })[], leaseMs: number): Step {
    const lockHeld = `IS_FREE_LOCK(${this.#lockName('k.scope', 'k.`key`')}) = 0`;
    const updates = owners.map(
      (o) =>
        [
          o.token,
          `UPDATE ${this.#t} AS k SET k.locked_until = ${NOW_MS} + ${int(leaseMs)}
WHERE ${this.#owner('k', o, !o.locked)}${o.locked ? ` AND ${lockHeld}` : ''}`,
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
   * Right before the holder's handler transaction, on its connection, in autocommit (MysqlStore.commitThenBegin):
   * takes the key's lease lock if `token` owns the row, then reads (a statement of its own, so a fresh snapshot after
   * the lock at any isolation level) whether it still does. MySQL has no transaction-scoped advisory lock: this is a
   * named lock (GET_LOCK), which belongs to the connection's session, so a crashed holder's lock goes with its
   * connection, and which the connection's release step frees when the transaction ends, however it ends, before the
   * connection goes back to the pool (ConnectionSession). While it is held, `takeOverLease` never
   * takes the claim over, whatever the renewals do. The second step's rows are empty when another call took the key
   * over before the lock was held (or the lock stayed busy): the handler must not run.
   *
   * Both statements are needed only after a takeover (dialect-lease-liveness.test.ts, "between the claim and the
   * handler"): a takeover of an expired completed row takes no lock in its UPDATE, so the lock is taken here, and
   * while this waits for it another call may take the key over, which only the read after the lock can see. A claim
   * that inserted its row took the lock in its INSERT, on this connection (MysqlStore.commitThenBegin), and holds it
   * since: no takeover can have come between (a lease takeover needs the lock; only a row whose lease and ttl both
   * ran out meanwhile could be replaced, and its completion is fenced off anyway). Both steps then send nothing:
   * two round trips fewer per first execution.
   */
  holdLease(r: LeaseOwner): Step[] {
    const lock = this.leaseLockName(r);
    let locked = false;
    let claimed = false;
    return [
      async (c) => {
        claimed = this.#claimedWithLock.get(c) === lock;
        if (claimed) {
          locked = true;
          return [{ locked: 1 }];
        }
        this.#freeOnRelease(c, lock);
        const { rows } = await c.query(
          // Already ours when a takeover of an in_progress row took it on this connection: not taken twice, so one
          // RELEASE_LOCK frees it.
          `SELECT CASE WHEN IS_USED_LOCK(${lock}) = CONNECTION_ID() THEN 1 ` +
            `ELSE GET_LOCK(${lock}, ${HOLD_LOCK_WAIT_S}) END AS locked
FROM ${this.#t} AS k WHERE ${this.#owner('k', r, false)}`,
        );
        locked = Number(rows[0]?.locked) === 1;
        return rows;
      },
      async (c) => {
        if (claimed) return [{ owned: 1 }];
        return locked
          ? (await c.query(`SELECT 1 AS owned FROM ${this.#t} AS k WHERE ${this.#owner('k', r, false)}`)).rows
          : [];
      },
    ];
  }

  releaseLease(r: LeaseOwner): Step {
    return plain(`DELETE FROM ${this.#t} WHERE ${this.#owner(this.#t, r, false)}`);
  }

  storeErrorFenced(r: LeaseOwner, response: string, ttlMs: number): Step {
    const update = `UPDATE ${this.#t} AS k SET ${stored(response, ttlMs)} WHERE ${this.#owner('k', r, false)}`;
    return async (c) => (Number((await c.query(update)).numAffectedRows ?? 0) > 0 ? [{ stored: 1 }] : []);
  }

  /**
   * Frees `lock` when `c` is given back (see releaseLock), registered once per connection and lock: a lease takeover
   * and its handler's holdLease both take it on one connection, and one release frees every count.
   */
  #freeOnRelease(c: StepConnection, lock: string): void {
    const locks = this.#releasing.get(c) ?? new Set<string>();
    this.#releasing.set(c, locks);
    if (locks.has(lock)) return;
    locks.add(lock);
    c.onRelease(releaseLock(lock));
  }

  /** The name of `r`'s lease lock, as an SQL expression (for tests and operators: `SELECT IS_USED_LOCK(…)`). */
  leaseLockName(r: RowKey): string {
    return this.#lockName(hexText(r.scope, MAX_SCOPE_BYTES), hexText(r.key));
  }

  /**
   * The key's lease lock, named from (database, table, scope, key) as SQL expressions. Named locks are server-wide
   * and at most 64 characters: a prefix and 160 bits of SHA-256 (57 characters). Two keys whose names collide only
   * make one wait for the other's lock or answer 409 a while longer, never run twice: the row decides ownership.
   */
  #lockName(scope: string, key: string): string {
    return (
      `CONCAT('trpc-idempotency:', LEFT(SHA2(CONCAT(${this.#lockTable}` +
      `, X'1F', ${scope}, X'1F', ${key}), 256), 40))`
    );
  }

  #where(a: string, r: RowKey): string {
    return `${a}.scope = ${hexText(r.scope, MAX_SCOPE_BYTES)} AND ${a}.\`key\` = ${hexText(r.key)}`;
  }

  /** The row is still `token`'s claim (and, with `liveLease`, its lease has not lapsed). */
  #owner(a: string, r: LeaseOwner, liveLease: boolean): string {
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
   * so `wait` never bounds the handler's own locks. Only `wait` bounds it: MariaDB's max_statement_time is lifted for
   * the statement, and MySQL 8's max_execution_time applies to read-only SELECTs, never to a claim.
   */
  async #bounded(c: StepConnection, statement: string, ms: number | undefined) {
    if (ms === undefined) return c.query(statement);
    if (this.#server.mariadb) {
      return c.query(
        `SET STATEMENT innodb_lock_wait_timeout = ${lockWaitSeconds(ms)}, max_statement_time = 0 FOR ${statement}`,
      );
    }
    const seconds = lockWaitSeconds(Math.max(ms, 1));
    await c.query(
      `SET @trpc_idempotency_lock_wait = @@SESSION.innodb_lock_wait_timeout, ` +
        `SESSION innodb_lock_wait_timeout = ${seconds}`,
    );
    try {
      return await c.query(statement);
    } finally {
      await c.query('SET SESSION innodb_lock_wait_timeout = @trpc_idempotency_lock_wait');
    }
  }
}
