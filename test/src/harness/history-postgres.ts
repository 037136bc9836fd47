import { type Kysely, sql } from 'kysely';
import { type Effect, formatVerdict, type HistoryMode, type HistoryVerdict, type Stuck } from './history.ts';
import type { HistoryRecorder } from './history-recording.ts';

/**
 * The database side of a history, on Postgres (PGlite included). Another dialect needs its own copy of
 * `findStuck` (the clock and the session view differ); `readEffects` is plain Kysely and ports as it is.
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

/**
 * What is left in progress: rows of the key table `in_progress` whose lease is dead (lease mode) or that exist at
 * all in transaction mode (its claims commit only as `done`), and sessions of this database idle inside a
 * transaction (a leaked claim: its uncommitted row is invisible, but it holds the key).
 */
export async function findStuck(
  db: Kysely<any>,
  opts: { mode: HistoryMode; table?: string; pglite?: boolean },
): Promise<Stuck[]> {
  const table = sql.table(opts.table ?? 'idempotency_keys');
  const { rows } = await sql<{ scope: string; key: string; lease_left_ms: number | null; token: string | null }>`
    select scope, key, token,
      (extract(epoch from (locked_until - clock_timestamp())) * 1000)::float8 as lease_left_ms
    from ${table} where status = 'in_progress'`.execute(db);
  const stuck: Stuck[] = [];
  for (const r of rows) {
    const live = r.lease_left_ms !== null && r.lease_left_ms > 0;
    if (opts.mode === 'transaction' && r.token === null) {
      stuck.push({ scope: r.scope, key: r.key, detail: 'a transaction-mode claim committed as in_progress' });
    } else if (!live) {
      stuck.push({ scope: r.scope, key: r.key, detail: 'in_progress with a dead lease and nobody to finish it' });
    }
  }
  if (opts.pglite) return stuck;
  const idle = await sql<{ pid: number; query: string; seconds: number }>`
    select pid, query, extract(epoch from (clock_timestamp() - state_change))::float8 as seconds
    from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and state like 'idle in transaction%'`.execute(db);
  for (const s of idle.rows) {
    stuck.push({
      scope: '*',
      key: '*',
      detail: `connection ${s.pid} idle in transaction for ${s.seconds.toFixed(1)} s after: ${s.query.replace(/\s+/g, ' ').slice(0, 160)}`,
    });
  }
  return stuck;
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
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from ${sql.table(table)}
    where status = 'in_progress' and locked_until > clock_timestamp()`.execute(db);
  return rows[0]?.n ?? 0;
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
