import { CompiledQuery, type Kysely } from 'kysely';
import { AsyncMutex } from '../../async-mutex.js';
import type { TableName } from '../../table-name.js';
import type { Row, RowKey, Session, Store } from '../dialect.js';
import type { PgPoolLike } from './pg-pool-like.js';
import { JoinedSession, KyselySession } from './postgres-kysely-session.js';
import { PoolSession } from './postgres-pool-session.js';
import type { PreparedStatements } from './postgres-prepared-statements.js';
import { RenewalClient } from './postgres-renewal-client.js';
import { BEGIN, claimedCheck, SAVEPOINT } from './postgres-statements.js';

/** Where the modes get transactions and autocommit statements from; hides the pg fast path / general path choice. */
export class PostgresStore implements Store {
  /** True when a statement list costs one round trip (the pg fast path). */
  readonly pipelined: boolean;
  /** Lease mode claims through `commitThenBegin` on the fast path. */
  readonly commitsThenBegins: boolean;
  readonly root: Kysely<any>;
  #own: Kysely<any>;
  #pool: PgPoolLike | undefined;
  #renewal: RenewalClient | undefined;
  #mutex: AsyncMutex | undefined;
  #detecting: Promise<void> | undefined;
  #detected = false;
  /** General path only: the driver sends a text of several statements in one round trip (see JoinedSession). */
  #joined = false;
  #table: TableName;
  /** The claim, prepared once per connection where the store holds its connections (postgres-prepared-statements). */
  #prepared: PreparedStatements | undefined;

  constructor(db: Kysely<any>, pool: PgPoolLike | undefined, table: TableName, prepared?: PreparedStatements) {
    this.root = db;
    this.#table = table;
    this.#prepared = prepared;
    // The fast path holds its connections; the general path learns in `ready` whether it may (see #detect).
    if (prepared) prepared.enabled = pool !== undefined;
    this.#own = db.withoutPlugins();
    this.#pool = pool;
    this.#renewal = pool ? RenewalClient.of(pool) : undefined;
    this.pipelined = pool !== undefined;
    this.commitsThenBegins = this.pipelined;
    // pg-pool stops listening for a client's errors when it hands the client out, and a new client can report a
    // terminated backend in the same socket read that completed its connection, before the holder can listen:
    // Node would crash on the unhandled 'error'. The failing query reports the error anyway.
    if (pool && !guardedPools.has(pool)) {
      guardedPools.add(pool);
      pool.on?.('connect', (client) => {
        client.on?.('error', ignoreClientError);
      });
    }
    // A pool means pg: nothing to detect.
    this.#detected = pool !== undefined;
  }

  /** Every session but the joined one reports the completion's row count (see JoinedSession). */
  get commitCounts(): boolean {
    return !this.#joined;
  }

  /** True on a single-connection database (PGlite): duplicates queue in JavaScript, nothing waits in Postgres. */
  get singleConnection(): boolean {
    return this.#mutex !== undefined;
  }

  /**
   * Learns once whether `db` is PGlite (one connection), and else whether its driver runs several statements in one
   * round trip. Cheap after the first call; retried after a failure.
   */
  ready(): Promise<void> | undefined {
    if (this.#detected) return undefined;
    this.#detecting ??= this.#detect().then(
      () => {
        this.#detected = true;
      },
      (error) => {
        this.#detecting = undefined;
        throw error;
      },
    );
    return this.#detecting;
  }

  async #detect(): Promise<void> {
    const { rows } = await this.#own.executeQuery<{ v: string }>(CompiledQuery.raw('select version() as v', []));
    if (/pglite|emscripten/i.test(rows[0]?.v ?? '')) {
      this.#mutex = new AsyncMutex();
      return;
    }
    // node-postgres sends a text without parameters over the simple protocol, which takes several statements;
    // drivers that always use the extended protocol (postgres.js, pg-native) refuse it, and keep one per trip.
    try {
      await this.#own.executeQuery(CompiledQuery.raw('SELECT 1; SELECT 2', []));
      this.#joined = true;
    } catch {
      this.#joined = false;
    }
    // Joined claims run on a connection held through Kysely's driver, one object per connection: the claim can be
    // prepared on it as on the fast path.
    if (this.#prepared) this.#prepared.enabled = this.#joined;
  }

  /** Opens a READ COMMITTED transaction and runs `statements` in it (one round trip on the fast path). */
  async begin(statements: readonly string[]): Promise<{ session: Session; rows: Row[][] }> {
    await this.ready();
    const unlock = await this.#mutex?.lock();
    try {
      const opened = this.#pool
        ? await PoolSession.begin(this.#pool, this.root, statements, [], this.#prepared)
        : this.#joined
          ? await JoinedSession.begin(this.root, statements)
          : await KyselySession.begin(this.root, statements, unlock !== undefined);
      return { session: unlock ? new UnlockingSession(opened.session, unlock) : opened.session, rows: opened.rows };
    } catch (error) {
      unlock?.();
      throw error;
    }
  }

  /**
   * General path on a driver that joins statements (see `ready`): opens the transaction with `statements` (the claim,
   * then the handler's savepoint) in one round trip and tells whether the claim owns `key`. Undefined elsewhere.
   */
  beginClaim(statements: readonly string[], key: RowKey): Promise<{ session: Session; owned: boolean }> | undefined {
    if (!this.#joined) return undefined;
    return JoinedSession.beginClaim(
      this.root,
      statements,
      claimedCheck(this.#table, key),
      `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`,
      this.#prepared,
    );
  }

  /**
   * Fast path only: commits `statement` (lease mode's claim) and opens the handler's transaction with `after` in it,
   * in one round trip. Returns the rows of the statement, then of `after`; the caller ends the session itself when
   * the claim found the key taken.
   */
  async commitThenBegin(
    statement: string,
    after: readonly string[] = [],
  ): Promise<{ session: Session; rows: Row[][] }> {
    if (!this.#pool) throw new Error('idempotency: commitThenBegin needs the pg fast path');
    // Its own BEGIN … COMMIT: in a multi-statement text, statements ahead of a BEGIN would join its transaction.
    const opened = await PoolSession.begin(this.#pool, this.root, after, [BEGIN, statement, 'COMMIT']);
    return { session: opened.session, rows: [opened.rows[1] ?? [], ...opened.rows.slice(3)] };
  }

  /**
   * Runs a lease renewal (autocommit). On the fast path it has a connection of its own, so it never queues behind
   * the handlers whose leases it renews; on the general path it shares `db`'s pool (a renewal that cannot get through
   * costs nothing but a stale `locked_until`: the holder's advisory lock keeps its claim, see
   * PostgresStatements.holdLease).
   */
  async renew(statement: string): Promise<Row[]> {
    if (this.#renewal) return this.#renewal.query(statement);
    return (await this.autocommit([statement]))[0] ?? [];
  }

  /** A lease is about to need renewals: opens their connection now (fast path). */
  warmRenewals(): void {
    this.#renewal?.warm();
  }

  /** No lease is left to renew: lets the renewal connection go, so it never keeps the process alive. */
  renewalsIdle(): void {
    this.#renewal?.close();
  }

  /** Runs one autocommit statement through Kysely and returns how many rows it changed. */
  async affected(text: string): Promise<number> {
    await this.ready();
    const unlock = await this.#mutex?.lock();
    try {
      return Number((await this.#own.executeQuery(CompiledQuery.raw(text, []))).numAffectedRows ?? 0);
    } finally {
      unlock?.();
    }
  }

  /** Runs statements outside any transaction of ours (one round trip on the fast path). */
  async autocommit(statements: readonly string[]): Promise<Row[][]> {
    await this.ready();
    const unlock = await this.#mutex?.lock();
    try {
      if (this.#pool) {
        const client = await this.#pool.connect();
        let broken: Error | undefined;
        const onError = (error: Error) => {
          broken = error;
        };
        client.on?.('error', onError);
        try {
          const result = await client.query(statements.join(';\n'));
          return (Array.isArray(result) ? result : [result]).map((r) => r.rows ?? []);
        } catch (error) {
          broken ??= error instanceof Error ? error : new Error(String(error));
          throw error;
        } finally {
          client.removeListener?.('error', onError);
          client.release(broken);
        }
      }
      const out: Row[][] = [];
      for (const text of statements) out.push((await this.#own.executeQuery<Row>(CompiledQuery.raw(text, []))).rows);
      return out;
    } finally {
      unlock?.();
    }
  }
}

function ignoreClientError(): void {}

/** Pools already guarded: one listener per pool, however many instances share it. */
const guardedPools = new WeakSet<PgPoolLike>();

/** Releases the PGlite mutex once the transaction is over, whichever way it ended. */
class UnlockingSession implements Session {
  #inner: Session;
  #unlock: () => void;

  constructor(inner: Session, unlock: () => void) {
    this.#inner = inner;
    this.#unlock = unlock;
  }

  get executor() {
    return this.#inner.executor;
  }

  run(statements: readonly string[]) {
    return this.#inner.run(statements);
  }

  async commit(statements: readonly string[]) {
    try {
      return await this.#inner.commit(statements);
    } finally {
      this.#unlock();
    }
  }

  async finish(statements: readonly string[]) {
    try {
      return await this.#inner.finish(statements);
    } finally {
      this.#unlock();
    }
  }

  async rollback(after?: readonly string[]) {
    try {
      return await this.#inner.rollback(after);
    } finally {
      this.#unlock();
    }
  }
}
