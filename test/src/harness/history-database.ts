import { type Kysely, sql } from 'kysely';
import { type Effect, formatVerdict, type HistoryMode, type HistoryVerdict, type Stuck } from './history.ts';
import type { HistoryRecorder } from './history-recording.ts';
import { type SqlFamily, sqlFamily } from './sql-family.ts';

/**
 * The database side of a history, on every dialect the middleware supports: Postgres (PGlite included), MySQL /
 * MariaDB, SQLite and libSQL. What differs per dialect — the database clock, how a key row reads back, how a
 * leaked transaction shows — lives in {@link DIALECT_PROBES}; the rest is plain Kysely.
 */

/** The committed effects: every ledger row, with the scope, key and run that wrote it. */
export async function readEffects(db: Kysely<any>, refPrefix = ''): Promise<Effect[]> {
  const rows = await db
    .selectFrom('ledger')
    .select(['scope', 'idem_key', 'run', 'user_id'])
    .where('ref', 'like', `${refPrefix}%`)
    .execute();
  return rows.map((r) => ({
    scope: (r.scope as string | null) ?? `user:${r.user_id}`,
    key: r.idem_key as string,
    ...(r.run ? { run: r.run as string } : {}),
  }));
}

/** An `in_progress` row of the key table, with its lease left by the database's clock. */
interface InProgressRow {
  scope: string;
  key: string;
  token: unknown;
  lease_left_ms: number | null;
}

interface DialectProbe {
  /** Every `in_progress` row. */
  inProgress(db: Kysely<any>, table: string): Promise<InProgressRow[]>;
  /** Sessions holding a transaction open with nothing running (a leaked claim), as `*` stuck entries. */
  idleTransactions(db: Kysely<any>): Promise<Stuck[]>;
}

/** MySQL and SQLite keep time as epoch milliseconds by the database clock, as the stores write it. */
const MYSQL_NOW_MS = sql.raw("(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)");
const SQLITE_NOW_MS = sql.raw("CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)");

/** MySQL returns VARBINARY columns as bytes. */
const text = (v: unknown): string => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));
const leaseLeft = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

const DIALECT_PROBES: Record<SqlFamily, DialectProbe> = {
  postgres: {
    async inProgress(db, table) {
      const { rows } = await sql<InProgressRow>`
        select scope, key, token,
          (extract(epoch from (locked_until - clock_timestamp())) * 1000)::float8 as lease_left_ms
        from ${sql.table(table)} where status = 'in_progress'`.execute(db);
      return rows;
    },
    async idleTransactions(db) {
      const idle = await sql<{ pid: number; query: string; seconds: number }>`
        select pid, query, extract(epoch from (clock_timestamp() - state_change))::float8 as seconds
        from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and state like 'idle in transaction%'`.execute(
        db,
      );
      return idle.rows.map((s) => ({
        scope: '*',
        key: '*',
        detail: `connection ${s.pid} idle in transaction for ${s.seconds.toFixed(1)} s after: ${s.query.replace(/\s+/g, ' ').slice(0, 160)}`,
      }));
    },
  },
  mysql: {
    async inProgress(db, table) {
      const { rows } = await sql<Record<string, unknown>>`
        select scope, \`key\`, token, locked_until - ${MYSQL_NOW_MS} as lease_left_ms
        from ${sql.table(table)} where status = 'in_progress'`.execute(db);
      return rows.map((r) => ({
        scope: text(r.scope),
        key: text(r.key),
        token: r.token,
        lease_left_ms: leaseLeft(r.lease_left_ms),
      }));
    },
    async idleTransactions(db) {
      // InnoDB's open transactions whose session sits idle ('Sleep'): nothing will ever commit them.
      const { rows } = await sql<{ id: number; seconds: number; started: unknown }>`
        select t.trx_mysql_thread_id as id, p.TIME as seconds, t.trx_started as started
        from information_schema.innodb_trx t
        join information_schema.processlist p on p.ID = t.trx_mysql_thread_id
        where p.DB = database() and p.COMMAND = 'Sleep' and t.trx_mysql_thread_id <> connection_id()`.execute(db);
      return rows.map((s) => ({
        scope: '*',
        key: '*',
        detail: `connection ${s.id} idle in a transaction (open since ${String(s.started)}, idle ${s.seconds} s)`,
      }));
    },
  },
  sqlite: {
    async inProgress(db, table) {
      const { rows } = await sql<InProgressRow>`
        select scope, key, token, locked_until - ${SQLITE_NOW_MS} as lease_left_ms
        from ${sql.table(table)} where status = 'in_progress'`.execute(db);
      return rows.map((r) => ({ ...r, lease_left_ms: leaseLeft(r.lease_left_ms) }));
    },
    async idleTransactions(db) {
      // SQLite shows no other connection's transaction; a leaked one holds the write lock, so take it and let go.
      try {
        await db.connection().execute(async (c) => {
          await sql`begin immediate`.execute(c);
          await sql`rollback`.execute(c);
        });
        return [];
      } catch (error) {
        return [{ scope: '*', key: '*', detail: `the write lock is held: ${String(error).slice(0, 120)}` }];
      }
    },
  },
};

/**
 * What is left in progress: rows of the key table `in_progress` whose lease is dead (lease mode) or that exist at
 * all in transaction mode (its claims commit only as `done`), and sessions idle inside a transaction (a leaked
 * claim: its uncommitted row is invisible, but it holds the key).
 */
export async function findStuck(
  db: Kysely<any>,
  opts: { mode: HistoryMode; table?: string; pglite?: boolean },
): Promise<Stuck[]> {
  const probe = DIALECT_PROBES[sqlFamily(db)];
  const stuck: Stuck[] = [];
  for (const r of await probe.inProgress(db, opts.table ?? 'idempotency_keys')) {
    const live = r.lease_left_ms !== null && r.lease_left_ms > 0;
    if (opts.mode === 'transaction' && r.token === null) {
      stuck.push({ scope: r.scope, key: r.key, detail: 'a transaction-mode claim committed as in_progress' });
    } else if (!live) {
      stuck.push({ scope: r.scope, key: r.key, detail: 'in_progress with a dead lease and nobody to finish it' });
    }
  }
  // PGlite has one session: the checker's own.
  if (opts.pglite) return stuck;
  return [...stuck, ...(await probe.idleTransactions(db))];
}

/**
 * Waits (bounded) until nothing is in progress any more — a lease holder still finishing, a transaction still
 * rolling back — and returns what is left: the stuck. A live lease is waited for, never reported.
 */
export async function settle(
  db: Kysely<any>,
  opts: { mode: HistoryMode; table?: string; pglite?: boolean; timeoutMs?: number },
): Promise<Stuck[]> {
  const deadline = Date.now() + (opts.timeoutMs ?? 5_000);
  for (;;) {
    const stuck = await findStuck(db, opts);
    const live = await liveLeases(db, opts.table);
    if ((stuck.length === 0 && live === 0) || Date.now() > deadline) return stuck;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function liveLeases(db: Kysely<any>, table = 'idempotency_keys'): Promise<number> {
  const rows = await DIALECT_PROBES[sqlFamily(db)].inProgress(db, table);
  return rows.filter((r) => r.lease_left_ms !== null && r.lease_left_ms > 0).length;
}

/**
 * Ends a recorded run: reads the committed effects, waits for the database to settle, applies the checker and
 * prints its figures. Returns the verdict; a test asserts `violations` is empty (see {@link violationList}).
 */
export async function judgeRun(
  recorder: HistoryRecorder,
  db: Kysely<any>,
  opts: {
    label: string;
    refPrefix?: string;
    /** The run cut connections or paused the database: an execution that committed nothing may have been cut. */
    excuseUncommitted?: string;
    pglite?: boolean;
    settleMs?: number;
  },
): Promise<HistoryVerdict> {
  // Bounded: a leaked transaction can hold the only connection (PGlite) and the database would never answer.
  const answered = await withinMs(5_000 + (opts.settleMs ?? 5_000), async () => {
    recorder.history.effects.push(...(await readEffects(db, opts.refPrefix)));
    if (opts.excuseUncommitted) recorder.excuseUncommitted(opts.excuseUncommitted);
    return settle(db, {
      mode: recorder.history.mode,
      ...(opts.pglite ? { pglite: true } : {}),
      ...(opts.settleMs ? { timeoutMs: opts.settleMs } : {}),
    });
  });
  recorder.history.stuck.push(
    ...(answered ?? [
      { scope: '*', key: '*', detail: 'the database did not answer the checker (its only connection is held?)' },
    ]),
  );
  const verdict = recorder.check();
  console.log(formatVerdict(opts.label, verdict));
  return verdict;
}

/** The violations as one line each, for `expect(…).toEqual([])`; the printed verdict holds their histories. */
export const violationList = (verdict: HistoryVerdict) =>
  verdict.violations.map((v) => `${v.rule} ${v.scope} ${JSON.stringify(v.key)}: ${v.message}`);

/** `work`'s result, or undefined when it takes longer than `ms`. */
async function withinMs<T>(ms: number, work: () => Promise<T>): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([work(), late]);
  } finally {
    clearTimeout(timer);
  }
}
