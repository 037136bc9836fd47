import type { Kysely } from 'kysely';
import { ConnectionSession, runSteps } from '../../connection/connection-session.js';
import { ConnectionStore } from '../../connection/connection-store.js';
import { type HeldConnection, holdConnection } from '../../connection/held-connection.js';
import type { Row, Session, Statement } from '../dialect.js';
import { isDeadlock } from './mysql-errors.js';
import type { MysqlServer } from './mysql-statements.js';

/**
 * Opens our transactions READ WRITE: a session's `SET SESSION TRANSACTION READ ONLY`, left on a pooled connection by
 * a handler's raw SQL, never reaches the next calls' claims (their isolation stays the app's, see MysqlStore).
 */
const START = 'START TRANSACTION READ WRITE';
/** A claim that lost a deadlock is opened again this often before the call answers 409. */
const DEADLOCK_RETRIES = 3;
/**
 * What a statement that stores a result holds besides it: the scope (2048 bytes) and key (255) as hex, the token,
 * the table name and the SQL around them — under 6 KiB; the rest of `max_allowed_packet` carries the result.
 */
const STATEMENT_RESERVE = 16 * 1024;

const decoder = new TextDecoder();

/**
 * Binary columns arrive as Buffers: ours hold UTF-8, so they become strings; `free` arrives as 0 / 1.
 * Exported for the tests.
 */
export function mysqlRow(row: Row): Row {
  const out: Row = {};
  for (const [name, value] of Object.entries(row)) {
    out[name] = value instanceof Uint8Array ? decoder.decode(value) : value;
  }
  if ('free' in out) out.free = Number(out.free) === 1;
  return out;
}

/**
 * The MySQL / MariaDB store: each transaction holds one pooled connection of the app's Kysely (mysql2 through
 * `MysqlDialect`, or any MySQL dialect) and runs at the app's own isolation level: no SET TRANSACTION, one round trip
 * fewer per call, and the handler's transaction is the one the app would open. A duplicate whose claim waited for the
 * original still sees the row it committed under InnoDB's REPEATABLE READ (MySQL's default): a snapshot is taken at a
 * transaction's first consistent read, not at START TRANSACTION, and the claim before the read is an INSERT or a
 * takeover's UPDATE, which take none (mysql-dialect.test.ts: "a duplicate that blocked on the claim … reads the
 * committed row"). Nothing of ours reads with a snapshot inside the handler's transaction: lease mode's lock check and
 * ownership read run before it, in autocommit (commitThenBegin).
 *
 * Renewals share the pool: a holder whose renewals cannot get a connection past its lease keeps its claim all the
 * same, by the named lock its connection holds (MysqlStatements.holdLease). In lease mode that connection is the
 * one its claim ran on (commitThenBegin): a holder never waits for a pooled connection between its claim and its
 * handler without the lock, which would let another instance take a live holder over.
 */
export class MysqlStore extends ConnectionStore {
  override readonly commitsThenBegins = true;
  readonly server: MysqlServer = { mariadb: false };
  /**
   * The largest result a completion can store: the server refuses a statement over `max_allowed_packet` (and
   * drops the connection), and a result travels as a hex literal, two characters a byte. Read once by `ready()`.
   */
  maxResultBytes: number | undefined;
  #db: Kysely<any>;
  #variant: 'mysql' | 'mariadb' | undefined;
  #detecting: Promise<void> | undefined;
  #detected = false;

  /** `variant` skips the version detection (tests run the MySQL 8 path on MariaDB with it). */
  constructor(db: Kysely<any>, variant?: 'mysql' | 'mariadb') {
    super();
    this.#db = db;
    this.#variant = variant;
    if (variant) this.server.mariadb = variant === 'mariadb';
  }

  /** Learns once whether the server is MariaDB and its `max_allowed_packet`; a failure is retried by the next call. */
  ready(): Promise<void> | undefined {
    if (this.#detected) return undefined;
    this.#detecting ??= this.#detect().finally(() => {
      this.#detecting = undefined;
    });
    return this.#detecting;
  }

  async #detect(): Promise<void> {
    const held = await this.hold();
    try {
      if (!this.#variant) {
        const { rows } = await held.query('SELECT VERSION() AS v');
        this.server.mariadb = /mariadb/i.test(String(rows[0]?.v ?? ''));
      }
      // The session's value: the global one as the connection opened (a session cannot change it).
      const { rows } = await held.query('SELECT @@max_allowed_packet AS packet');
      const packet = Number(rows[0]?.packet);
      this.maxResultBytes = packet > 0 ? Math.floor((packet - STATEMENT_RESERVE) / 2) : undefined;
      this.#detected = true;
    } finally {
      await held.release();
    }
  }

  hold(): Promise<HeldConnection> {
    return holdConnection(this.#db, mysqlRow);
  }

  begin(statements: readonly Statement[]): Promise<{ session: Session; rows: Row[][] }> {
    return this.#open(async (session, held) => {
      await held.query(START);
      return session.run(statements);
    });
  }

  /**
   * Lease mode's claim: runs `statement` in autocommit on a held connection, then, if it owns the key, runs `after`
   * (holdLease: after a takeover, the lock check and the ownership read) on that same connection, still in autocommit
   * — so the ownership read after waiting for the lock is a fresh read whatever the isolation level —, and opens the
   * handler's transaction; if not, the session serves to read the row. The claim takes the key's lease lock in its
   * statement (a session lock: it outlives the commit), so from the claim's commit to the handler's end the holder
   * holds it, however long the call waits for pooled connections meanwhile (its renewals) — a live holder is never
   * without its lock.
   */
  override commitThenBegin(
    statement: Statement,
    after: readonly Statement[] = [],
  ): Promise<{ session: Session; rows: Row[][] }> {
    return this.#open(async (session, held, committed) => {
      const claimed = (await session.run([statement]))[0] ?? [];
      if (claimed.length === 0) {
        // Lost: the session serves to read the row, in autocommit like the claim, and ends without a ROLLBACK.
        session.noTransaction();
        return [claimed];
      }
      committed();
      const checked = await session.run(after);
      await held.query(START);
      return [claimed, ...checked];
    });
  }

  /** Runs `steps` on a held connection; a deadlock victim starts again, unless its claim had committed. */
  async #open(
    steps: (session: ConnectionSession, held: HeldConnection, committed: () => void) => Promise<Row[][]>,
  ): Promise<{ session: Session; rows: Row[][] }> {
    await this.ready();
    for (let attempt = 1; ; attempt++) {
      const held = await this.hold();
      const session = new ConnectionSession(
        held,
        this.#db,
        (after) => this.autocommit(after),
        (h) => h.query('COMMIT'),
      );
      let again = attempt < DEADLOCK_RETRIES;
      try {
        const rows = await steps(session, held, () => {
          again = false;
        });
        return { session, rows };
      } catch (error) {
        await session.rollback().catch(() => {});
        // Nothing of the handler ran yet, nor did a claim commit: a deadlock victim's claim can be opened again.
        if (isDeadlock(error) && again) continue;
        throw error;
      }
    }
  }

  async autocommit(statements: readonly Statement[]): Promise<Row[][]> {
    await this.ready();
    const held = await this.hold();
    try {
      return await runSteps(held, statements);
    } finally {
      // After the steps' own release steps (a takeover's try of the lease lock): the pool never gets a lock back.
      await held.release();
    }
  }
}
