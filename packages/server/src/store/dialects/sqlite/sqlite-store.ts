import type { Kysely } from 'kysely';
import { AsyncMutex } from '../../async-mutex.js';
import { ConnectionSession } from '../../connection/connection-session.js';
import { ConnectionStore } from '../../connection/connection-store.js';
import { type HeldConnection, holdConnection } from '../../connection/held-connection.js';
import { runThen } from '../../session.js';
import type { Row, Session, Statement } from '../dialect.js';
import { isSqliteBusy } from './sqlite-errors.js';

/** First and largest pause between two tries for the write lock another process holds. */
const BUSY_FIRST_MS = 2;
const BUSY_MAX_MS = 50;
/** The least a live holder waits for the write lock on a key it owns (see SqliteStore's constructor). */
const HOLDER_WAIT_MS = 10_000;

/**
 * The least a claim waits for the write lock, whatever its `wait`: on SQLite every writer takes it, so a claim
 * with `wait` 0 would otherwise answer 409 whenever an unrelated write (another key's claim, a renewal: a
 * statement or two) held it at that instant, even for a key that is done and would replay.
 */
const CLAIM_WAIT_FLOOR_MS = 50;

/** The bound a list's first step carries on the wait for the write lock (a claim's `wait`), if any. */
function lockWaitOf(statements: readonly Statement[]): number | undefined {
  const first = statements[0];
  const bound = typeof first === 'function' ? first.lockWaitMs : undefined;
  return bound === undefined ? undefined : Math.max(bound, CLAIM_WAIT_FLOOR_MS);
}

/** `free` arrives as 0 / 1 (or NULL); integers may arrive as bigint (libSQL's `intMode: 'bigint'`). */
function sqliteRow(row: Row): Row {
  const out: Row = {};
  for (const [name, value] of Object.entries(row)) out[name] = typeof value === 'bigint' ? Number(value) : value;
  if ('free' in out) out.free = Number(out.free) === 1;
  return out;
}

/**
 * The SQLite store (better-sqlite3 through `SqliteDialect`, libSQL through `@libsql/kysely-libsql`). One writer at
 * a time: every transaction of ours opens with BEGIN IMMEDIATE, so the claim holds the write lock until the
 * handler's transaction commits, and another process's duplicate waits for it, then reads the committed row.
 *
 * Both drivers are synchronous: SQLite's own busy wait would freeze the event loop. So BEGIN IMMEDIATE runs with
 * busy_timeout 0 and a busy database is tried again after a pause, in JavaScript, until the bound runs out
 * (`wait` for a claim); so does a COMMIT held up by readers in rollback-journal mode (see #commit, where libSQL is
 * the exception). In one process the calls queue (Kysely lends its one connection to one holder at a time,
 * and this store's mutex orders its own transactions): handlers must use ctx.idempotency.db, never the root db.
 *
 * Other processes may share the file: a claim's wait is bounded (by the BEGIN IMMEDIATE it needs), and lease mode
 * renews. A renewal queues behind the running handler's transaction (one connection), which is harmless: that
 * transaction holds the write lock, so no other connection or process can take the claim over meanwhile, however
 * long the handler runs (dialect-lease-liveness.test.ts).
 */
export class SqliteStore extends ConnectionStore {
  #db: Kysely<any>;
  #mutex = new AsyncMutex();
  #defaultWaitMs: number;
  /** The app's busy_timeout, put back after each BEGIN IMMEDIATE and COMMIT (the handler's queries run with it). */
  #busyTimeout: number | undefined;

  /**
   * `waitMs` (the `wait` option) bounds a claim's wait for the write lock, which its statements carry (lockWaitMs).
   * What carries no bound is a live holder's own work on a key it owns: its handler's transaction, the release or
   * stored error after a rollback, renewals. That waits longer (at least HOLDER_WAIT_MS): while other processes'
   * claims and renewals keep the write lock busy, a holder giving up would answer an error for a key it owns, and
   * after its handler ran, leave the key to run again.
   */
  constructor(db: Kysely<any>, waitMs: number) {
    super();
    this.#db = db;
    this.#defaultWaitMs = Math.max(waitMs, HOLDER_WAIT_MS);
  }

  ready(): undefined {
    return undefined;
  }

  async begin(
    statements: readonly Statement[],
    waitMs = lockWaitOf(statements),
  ): Promise<{
    session: Session;
    rows: Row[][];
  }> {
    const { held, unlock } = await this.#beginImmediate(waitMs ?? this.#defaultWaitMs);
    const release = async () => {
      await held.release();
      unlock();
    };
    const session = new ConnectionSession(
      { ...held, release },
      this.#db,
      (after) => this.autocommit(after),
      (h) => this.#commit(h),
    );
    try {
      return { session, rows: await session.run(statements) };
    } catch (error) {
      await session.rollback().catch(() => {});
      throw error;
    }
  }

  /** Our autocommit statements write: each list runs in its own BEGIN IMMEDIATE … COMMIT. */
  async autocommit(statements: readonly Statement[]): Promise<Row[][]> {
    // A claim's or a duplicate's read carries its bound (`wait`); the holder's own writes take the default.
    const { session } = await this.begin([], lockWaitOf(statements));
    return runThen(session, statements, () => session.commit([]));
  }

  /** Runs `statements` (SQL text) in one write transaction: migrate() and purgeExpired(). */
  async write(statements: readonly string[]): Promise<number> {
    const { held, unlock } = await this.#beginImmediate(Math.max(this.#defaultWaitMs, 5_000));
    let changed = 0;
    try {
      for (const text of statements) changed = Number((await held.query(text)).numAffectedRows ?? 0);
      await this.#commit(held);
      return changed;
    } catch (error) {
      await held.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      await held.release();
      unlock();
    }
  }

  /**
   * COMMIT, which in rollback-journal mode takes the EXCLUSIVE lock: it waits for other connections' readers to
   * let go of SHARED (the PENDING lock it holds meanwhile lets no new reader in, so they drain). We hold the write
   * lock and the transaction may hold a handler's work: rolling back because a reader was in the way would run the
   * handler again, so the COMMIT waits as long as the holder's own work may. In WAL mode readers never block it.
   *
   * better-sqlite3: busy_timeout 0 and the pauses in JavaScript, as for BEGIN IMMEDIATE (a busy COMMIT leaves the
   * transaction open, and the statement is reset, so it is simply tried again). libSQL leaves a busy statement in
   * progress: a COMMIT tried again then succeeds, but the stuck statement keeps the connection's SHARED lock until
   * garbage collection, and every other connection's COMMIT waits for that. So libSQL's COMMIT waits inside SQLite
   * (busy_timeout), which blocks the event loop while another connection reads: WAL avoids it.
   */
  async #commit(held: HeldConnection): Promise<void> {
    if (isLibsql(held)) {
      await this.#withBusyTimeout(held, this.#defaultWaitMs, () => held.query('COMMIT'));
      return;
    }
    await this.#withBusyTimeout(held, 0, () => retryBusy(this.#defaultWaitMs, () => held.query('COMMIT')));
  }

  /** Runs `work` with busy_timeout `ms` (0: SQLite's busy wait would block the loop), then puts the app's back. */
  async #withBusyTimeout<T>(held: HeldConnection, ms: number, work: () => Promise<T>): Promise<T> {
    if (this.#busyTimeout === undefined) {
      const { rows } = await held.query('PRAGMA busy_timeout');
      this.#busyTimeout = Number(Object.values(rows[0] ?? {})[0] ?? 0);
    }
    await held.query(`PRAGMA busy_timeout = ${Math.floor(ms)}`);
    try {
      return await work();
    } finally {
      await held.query(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(this.#busyTimeout))}`);
    }
  }

  /**
   * Takes the write lock: BEGIN IMMEDIATE with busy_timeout 0, tried again after a growing pause while another
   * connection holds it, for at most `waitMs`; then the SQLITE_BUSY error goes to the caller (409 at a claim).
   * Between tries the connection and the mutex are given back, so the process's other work goes on.
   */
  async #beginImmediate(waitMs: number): Promise<{ held: HeldConnection; unlock: () => void }> {
    return retryBusy(waitMs, async () => {
      const unlock = await this.#mutex.lock();
      let held: HeldConnection | undefined;
      try {
        held = await holdConnection(this.#db, sqliteRow);
        const connection = held;
        await this.#withBusyTimeout(connection, 0, () => connection.query('BEGIN IMMEDIATE'));
        return { held: connection, unlock };
      } catch (error) {
        if (held && isSqliteBusy(error)) await dropLibsqlConnection(held);
        await held?.release();
        unlock();
        throw error;
      }
    });
  }
}

/** Runs `attempt` until it does not fail with SQLITE_BUSY, pausing in between, for at most `waitMs`. */
async function retryBusy<T>(waitMs: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + waitMs;
  let pause = BUSY_FIRST_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const left = deadline - performance.now();
      if (!isSqliteBusy(error) || left <= 0) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)));
      pause = Math.min(pause * 2, BUSY_MAX_MS);
    }
  }
}

/** What this store uses of a libSQL client (`@libsql/client`, the `client` of kysely-libsql's connection). */
interface LibsqlClient {
  execute(statement: string | { sql: string; args: unknown[] }): Promise<{ rows: Record<string, unknown>[] }>;
  transaction(mode: string): Promise<{ close(): void }>;
}

/**
 * libSQL (libsql 0.3) leaves a statement that failed with SQLITE_BUSY in progress: every later COMMIT on that
 * native connection fails ("SQL statements in progress"). Its client opens a fresh connection after handing the
 * current one to a transaction, so hand it over (BEGIN DEFERRED takes no lock) and drop it. ATTACH belongs to a
 * connection: the databases the app attached to the dropped one (a schema-qualified `table` may live there) are
 * attached again on the fresh one.
 */
async function dropLibsqlConnection(held: HeldConnection): Promise<void> {
  const client = libsqlClient(held);
  if (!client) return;
  try {
    const attached = (await client.execute('PRAGMA database_list')).rows
      .map((row) => ({ name: String(row.name), file: String(row.file ?? '') }))
      // An in-memory attachment (no file) cannot be carried over.
      .filter((db) => db.name !== 'main' && db.name !== 'temp' && db.file !== '');
    const poisoned = await client.transaction('deferred');
    try {
      poisoned.close();
    } catch {
      // Its ROLLBACK fails for the same reason; the connection is dropped all the same.
    }
    for (const { name, file } of attached) {
      await client.execute({ sql: `ATTACH DATABASE ? AS "${name.replaceAll('"', '""')}"`, args: [file] });
    }
  } catch {
    // Not the libSQL client this was written for (nothing to drop), or an attachment that cannot be made again:
    // the next statement on its table says the table is missing.
  }
}

/** The libSQL client behind `@libsql/kysely-libsql`'s connection, if that is the driver. */
function libsqlClient(held: HeldConnection): LibsqlClient | undefined {
  const client = (held.connection as { client?: Partial<LibsqlClient> }).client;
  return typeof client?.transaction === 'function' && typeof client.execute === 'function'
    ? (client as LibsqlClient)
    : undefined;
}

function isLibsql(held: HeldConnection): boolean {
  return libsqlClient(held) !== undefined;
}
