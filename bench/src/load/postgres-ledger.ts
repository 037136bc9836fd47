import { readFileSync } from 'node:fs';
import pg from 'pg';

/** Cumulative counters of the bench database, read in one statement on a connection of its own. */
export interface DbSnapshot {
  /** Commits + rollbacks in the bench database (pg_stat_database). */
  xacts: number;
  /** Key-table row writes (pg_stat_user_tables, summed over ours' and classic's key tables). */
  inserted: number;
  updated: number;
  hotUpdated: number;
  deleted: number;
  /** WAL flush position (cluster-wide). */
  lsn: string;
}

const KEY_TABLES = ['idempotency_keys', 'classic_keys'];

/**
 * A fresh connection per snapshot, closed at once: its backend flushes its own statistics when it exits, so
 * the next snapshot sees exactly one transaction of it (the snapshot statement itself), which the ledger
 * subtracts. (A long-lived connection would flush its counts whenever Postgres chose to.)
 */
export async function dbSnapshot(url: string): Promise<DbSnapshot> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench:ledger' });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()) AS xacts,
        coalesce(sum(n_tup_ins), 0) AS ins, coalesce(sum(n_tup_upd), 0) AS upd,
        coalesce(sum(n_tup_hot_upd), 0) AS hot, coalesce(sum(n_tup_del), 0) AS del,
        pg_current_wal_flush_lsn()::text AS lsn
       FROM pg_stat_user_tables WHERE relname = ANY($1)`,
      [KEY_TABLES],
    );
    const r = rows[0] as Record<string, string>;
    return {
      xacts: Number(r.xacts),
      inserted: Number(r.ins),
      updated: Number(r.upd),
      hotUpdated: Number(r.hot),
      deleted: Number(r.del),
      lsn: r.lsn!,
    };
  } finally {
    await client.end();
  }
}

let walinspectWarned = false;

/** A WAL position (`16/B374D4A8`) as a byte offset. */
const lsnBytes = (lsn: string) => {
  const [hi, lo] = lsn.split('/');
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`);
};

/** Creates pg_walinspect in the bench database (once, before the ledger: its DDL is no call's cost). */
export async function enableWalinspect(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench:ledger' });
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  } catch (error) {
    console.error(`pg_walinspect: ${(error as Error).message}`);
  } finally {
    await client.end();
  }
}

/**
 * WAL between two positions: all of it (every database on the server writes there: the difference of the
 * positions), and the part that is the bench database's — records touching its relations, plus the records (commits) of the same transactions —
 * read with pg_walinspect. `own` is NaN when the extension cannot be created.
 */
export async function walBytes(url: string, from: string, to: string): Promise<{ cluster: number; own: number }> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench:ledger' });
  await client.connect();
  try {
    const cluster = Number(lsnBytes(to) - lsnBytes(from));
    let own = Number.NaN;
    if (cluster <= 0) return { cluster, own: 0 };
    try {
      const { rows } = await client.query(
        `WITH r AS (SELECT xid::text AS xid, record_length, block_ref FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)),
           db AS (SELECT '%/' || oid::text || '/%' AS rel FROM pg_database WHERE datname = current_database()),
           mine AS (SELECT DISTINCT xid FROM r, db WHERE r.block_ref LIKE db.rel AND r.xid <> '0')
         SELECT coalesce(sum(record_length), 0) AS own FROM r, db
         WHERE r.block_ref LIKE db.rel OR r.xid IN (SELECT xid FROM mine)`,
        [from, to],
      );
      own = Number(rows[0].own);
    } catch (error) {
      // Not superuser, or no contrib: the cluster-wide figure stands alone.
      if (!walinspectWarned) console.error(`pg_walinspect: ${(error as Error).message}`);
      walinspectWarned = true;
    }
    return { cluster, own };
  } finally {
    await client.end();
  }
}

/**
 * A connection to the server's `postgres` database, for what the ledger asks about the bench database's
 * backends: its own statements must not count as transactions of the bench database.
 */
export async function adminClient(url: string): Promise<pg.Client> {
  const admin = new URL(url);
  const database = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), application_name: 'bench:ledger' });
  await client.connect();
  (client as pg.Client & { benchDatabase?: string }).benchDatabase = database;
  return client;
}

const databaseOf = (client: pg.Client) => (client as pg.Client & { benchDatabase?: string }).benchDatabase;

/** The pids of a contender's Postgres backends in the bench database (by application_name). */
export async function backendPids(admin: pg.Client, applicationName: string): Promise<number[]> {
  const { rows } = await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2', [
    databaseOf(admin),
    applicationName,
  ]);
  return rows.map((r: { pid: number }) => r.pid);
}

/**
 * Ends a contender's backends and waits until they are gone. An exiting backend flushes its statistics; an
 * idle one may hold them back for up to 10 s (Postgres 15+), so this is how a batch's counts become exact.
 * The server's pool drops the dead connections and opens a new one on its next call.
 */
export async function endBackends(admin: pg.Client, applicationName: string): Promise<void> {
  const pids = await backendPids(admin, applicationName);
  if (!pids.length) return;
  await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
  for (let i = 0; i < 100; i++) {
    const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])', [
      pids,
    ]);
    if (rows[0].n === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  // The statistics are flushed on the way out; give the last backend a moment past leaving pg_stat_activity.
  await new Promise((r) => setTimeout(r, 100));
}

/**
 * CPU time a process has run, µs: /proc/<pid>/schedstat (nanoseconds) when the kernel keeps it, else
 * utime + stime from /proc/<pid>/stat (10 ms ticks). Undefined once the process is gone.
 */
export function processCpuMicros(pid: number): number | undefined {
  try {
    const ns = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    if (Number.isFinite(ns)) return ns / 1000;
  } catch {
    // fall through to /proc/<pid>/stat
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}
