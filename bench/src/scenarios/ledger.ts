import { type BenchEnv, server } from '../bench-env.ts';
import { runTag } from '../contenders/contender-spec.ts';
import { sendKeys } from '../load/http-load.ts';
import {
  adminClient,
  backendPids,
  dbSnapshot,
  enableWalinspect,
  endBackends,
  processCpuMicros,
  walBytes,
} from '../load/postgres-ledger.ts';
import { backendName } from '../server/spawn-server.ts';

export type LedgerCall = 'light' | 'payment' | 'replay';

/** What one call costs, per contender and call kind: exact counts over N sequential calls, ÷ N. */
export interface LedgerRow {
  contender: string;
  call: LedgerCall;
  calls: number;
  /** SQL round trips (pg `Client.query` calls) and the statements in them; Redis commands. */
  roundTrips: number;
  statements: number;
  redis: number;
  /** Transactions the bench database counted (commits + rollbacks). */
  transactions: number;
  /** Key-table rows (ours' or classic's): inserted, updated (of which HOT), deleted. */
  keyInserts: number;
  keyUpdates: number;
  keyHotUpdates: number;
  keyDeletes: number;
  /** WAL bytes of the bench database's records (pg_walinspect), and the whole server's WAL advance. */
  walBytes: number;
  walBytesCluster: number;
  /** CPU of the contender's Postgres backends, and of its server process (the Postgres client), µs. */
  serverCpuMicros: number;
  clientCpuMicros: number;
}

/**
 * The per-call cost ledger: each contender in turn, one call at a time (so the figures do not depend on the
 * rate or on contention), N light calls, N payment calls, then the N light keys again (replays).
 *
 * Per batch: end the contender's backends (their statistics flush as they exit) → snapshot → one call that
 * opens a fresh connection → CPU and counters → N calls → CPU and counters → end the backends → snapshot.
 * Round trips, statements and CPU come from the N calls alone (no connection start-up in them); the
 * database's counters (transactions, key rows, WAL) cover the N + 1 calls of the same kind and are divided
 * by N + 1.
 */
export async function ledgerScenario(env: BenchEnv): Promise<LedgerRow[]> {
  const N = env.params.ledgerCalls;
  const rows: LedgerRow[] = [];
  await enableWalinspect(env.databaseUrl);
  const admin = await adminClient(env.databaseUrl);
  try {
    for (const spec of env.contenders) {
      const s = server(env, spec.name);
      const app = backendName(spec.name);
      const id = spec.name.replace(/[^A-Za-z0-9-]/g, '_');
      const keys = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${runTag}-lg-${id}-${tag}${i}`);
      // Warm-up (JIT, statement texts) outside the measured batches.
      await sendKeys(s.url, 'light', keys('wl', 30), 1);
      await sendKeys(s.url, 'payment', keys('wp', 30), 1);
      const measure = async (call: LedgerCall, path: string, first: string, list: string[]) => {
        await endBackends(admin, app);
        const before = await dbSnapshot(env.databaseUrl);
        await sendKeys(s.url, path, [first], 1);
        const pids = await backendPids(admin, app);
        const cpuBefore = new Map(pids.map((p) => [p, processCpuMicros(p) ?? 0]));
        const counters = await s.counters();
        const ok = await sendKeys(s.url, path, list, 1);
        const countersAfter = await s.counters();
        const pidsAfter = await backendPids(admin, app);
        let serverCpu = 0;
        for (const pid of pidsAfter) serverCpu += (processCpuMicros(pid) ?? 0) - (cpuBefore.get(pid) ?? 0);
        // A backend that closed inside the batch takes its CPU with it: say so rather than under-count quietly.
        const lost = pids.filter((p) => !pidsAfter.includes(p)).length;
        const opened = pidsAfter.filter((p) => !pids.includes(p)).length;
        if (lost || opened)
          env.log(`  ${spec.name} ${call}: backends closed ${lost}, opened ${opened} during the batch`);
        await endBackends(admin, app);
        const after = await dbSnapshot(env.databaseUrl);
        const wal = await walBytes(env.databaseUrl, before.lsn, after.lsn);
        const n = list.length;
        const per = (a: number, b: number) => (a - b) / n;
        // The database's counters include the opening call (same kind): ÷ (n + 1).
        const perAll = (a: number, b: number) => (a - b) / (n + 1);
        const row: LedgerRow = {
          contender: spec.name,
          call,
          calls: n,
          roundTrips: per(countersAfter.queries, counters.queries),
          statements: per(countersAfter.statements, counters.statements),
          redis: per(countersAfter.redis, counters.redis),
          // The `before` snapshot's own statement is one transaction of the bench database.
          transactions: perAll(after.xacts - 1, before.xacts),
          keyInserts: perAll(after.inserted, before.inserted),
          keyUpdates: perAll(after.updated, before.updated),
          keyHotUpdates: perAll(after.hotUpdated, before.hotUpdated),
          keyDeletes: perAll(after.deleted, before.deleted),
          walBytes: wal.own / (n + 1),
          walBytesCluster: wal.cluster / (n + 1),
          serverCpuMicros: serverCpu / n,
          clientCpuMicros: per(countersAfter.cpuMicros, counters.cpuMicros),
        };
        if (ok !== n) env.log(`  ${spec.name} ${call}: only ${ok}/${n} answered 200`);
        env.log(
          `  ${spec.name.padEnd(22)} ${call.padEnd(7)} rt ${row.roundTrips.toFixed(2)} stmt ${row.statements.toFixed(2)} redis ${row.redis.toFixed(2)} tx ${row.transactions.toFixed(2)} key ins/upd/hot/del ${row.keyInserts.toFixed(2)}/${row.keyUpdates.toFixed(2)}/${row.keyHotUpdates.toFixed(2)}/${row.keyDeletes.toFixed(2)} WAL ${Math.round(row.walBytes)} B (server ${Math.round(row.walBytesCluster)}) pg ${Math.round(row.serverCpuMicros)} µs node ${Math.round(row.clientCpuMicros)} µs`,
        );
        rows.push(row);
      };
      const light = keys('l', N);
      if (!spec.replayOnly) {
        await measure('light', 'light', `${runTag}-lg-${id}-l-first`, light);
        const payment = keys('p', N + 1);
        await measure('payment', 'payment', payment[N]!, payment.slice(0, N));
      } else {
        await sendKeys(s.url, 'light', [...light, `${runTag}-lg-${id}-l-first`], 1);
      }
      // Replays: the completed light keys again (the opening call replays one of them too).
      if (spec.kind !== 'plain') await measure('replay', 'light', `${runTag}-lg-${id}-l-first`, light);
    }
  } finally {
    await admin.end();
  }
  return rows;
}
