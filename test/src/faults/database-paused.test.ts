import { readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '@trpc-idempotency/test-db';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { createLedger } from '../harness/payments-app.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { chaosSeed, seededRandom } from '../harness/seeded-random.ts';
import { ServerProcess } from '../harness/server-process.ts';

const SEED = chaosSeed(1106);
const LEASE_MS = 1_000;
const PAUSE_MS = 2_500;
const KEYS = 30;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let pgServer: EmbeddedPostgres;
const cleanups: (() => Promise<unknown>)[] = [];
beforeAll(async () => {
  // A Postgres of this file's own: SIGSTOP freezes every database on it.
  pgServer = await startEmbeddedPostgres();
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  await pgServer?.stop();
});

/** The postmaster (parent of any backend) and its children: every process of this Postgres. */
async function postgresProcesses(db: Kysely<any>): Promise<number[]> {
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  const postmaster = parentOf(Number(rows[0]?.pid));
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (parentOf(Number(entry)) === postmaster) children.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return [postmaster, ...children];
}

function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces and parentheses: the fields after its closing parenthesis are fixed.
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** Freezes every Postgres process (postmaster first: it forks no backend while stopped), then thaws them. */
async function pausePostgres(db: Kysely<any>, ms: number): Promise<number> {
  const pids = await postgresProcesses(db);
  for (const pid of pids) process.kill(pid, 'SIGSTOP');
  try {
    await sleep(ms);
  } finally {
    for (const pid of [...pids].reverse()) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {}
    }
  }
  return pids.length;
}

/**
 * Two app servers on one Postgres, every key sent to both at once; mid-traffic the whole Postgres is frozen
 * (SIGSTOP) for 2.5 s — longer than the 1 s lease — and thawed. Leases judged by the database clock lapse
 * during the freeze although their holders live: whatever runs again must not take effect twice, answer
 * differently, or leave anything in progress.
 */
describe.each([
  ['transaction', true],
  ['transaction', false],
  ['lease', true],
  ['lease', false],
] as const)('the database paused past a lease (%s mode, pool fast path: %s)', (mode, rawPool) => {
  it('takes effect once per key, answers alike and leaves nothing in progress after a SIGSTOP longer than the lease', async () => {
    const name = `paused_${mode}_${rawPool ? 'pool' : 'kysely'}`;
    const admin = new pg.Client({ connectionString: pgServer.url });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const url = new URL(pgServer.url);
    url.pathname = `/${name}`;
    const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
    pool.on('error', () => {});
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    cleanups.push(() => db.destroy());
    await createLedger(db);

    const recorder = new HistoryRecorder(mode);
    const servers = ['A', 'B'].map(
      (instance) =>
        new ServerProcess({
          databaseUrl: url.toString(),
          mode,
          rawPool,
          instance,
          leaseMs: LEASE_MS,
          waitMs: 1_000,
          handlerDelayMs: 300,
          poolMax: 4,
        }),
    );
    for (const s of servers) cleanups.push(() => s.stop());
    await Promise.all(servers.map((s) => s.start()));
    const watching = recorder.watch(...servers);
    const stats = emptyClientStats();
    const link = { attemptTimeoutMs: 2_000, baseDelayMs: 100, maxDelayMs: 800, maxElapsedMs: 10_000 };
    const clients = servers.map((s) =>
      createPaymentsClient({ url: `http://127.0.0.1:${s.port}`, stats, recorder, link }),
    );
    const random = seededRandom(SEED);
    const started = Date.now();
    const deadline = started + 60_000;
    let frozen = 0;
    const pause = (async () => {
      // Mid-traffic whatever the machine's speed: once a third of the keys have started.
      while (stats.calls < (KEYS * 2) / 3) await sleep(20);
      frozen = await pausePostgres(db, PAUSE_MS);
    })();
    pause.catch(() => {});
    const lanes = 6;
    await Promise.all(
      Array.from({ length: lanes }, async (_, lane) => {
        for (let i = lane; i < KEYS; i += lanes) {
          const key = `paused-${SEED}-${i}`;
          const input = { ref: `paused-${i}`, amount: i + 1 };
          await sleep(Math.floor(random() * 50));
          await Promise.all(clients.map((c) => payUntilDone(c, input, stats, deadline, key)));
        }
      }),
    );
    await pause;
    watching.stop();
    const verdict = await judgeRun(recorder, db, {
      label: `faults:database-paused:${mode}:${rawPool ? 'pool' : 'kysely'}`,
      // A lease lapses while its holder lives only because the database stood still: the holder may be taken
      // over, so long as its own work is fenced off (it committed nothing). A transaction holds its row lock.
      ...(mode === 'lease' ? { excuseUncommitted: 'its lease lapsed while the database was frozen' } : {}),
      settleMs: 10_000,
    });
    console.log(
      `[faults:database-paused:${mode}:${rawPool ? 'pool' : 'kysely'}] seed ${SEED}, ${KEYS} keys × 2 instances, ${frozen} Postgres processes frozen for ${PAUSE_MS} ms (lease ${LEASE_MS} ms), ${((Date.now() - started) / 1000).toFixed(1)} s; ${stats.linkRetries} link retries, ${stats.callerResends} caller re-sends`,
    );
    expect(frozen).toBeGreaterThan(1);
    expect(violationList(verdict)).toEqual([]);
    expect(verdict.counts.effects).toBe(KEYS);
  });
});
