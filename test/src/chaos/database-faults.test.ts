import { randomUUID } from 'node:crypto';
import {
  createTestDatabase,
  type EmbeddedPostgres,
  startEmbeddedPostgres,
  type TestDatabase,
} from '@trpc-idempotency/test-db';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { countEvents, formatCounts, ledgerSummary } from '../harness/ledger-checks.ts';
import { createLedger } from '../harness/payments-app.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { ServerProcess } from '../harness/server-process.ts';
import { callRaw } from '../harness/trpc-http.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

type Result = { paymentId: string; key: string };

/** Sends `count` payments from `clients` clients; resolves with every result by ref. */
async function traffic(opts: {
  server: ServerProcess;
  url: string;
  clients: number;
  count: number;
  prefix: string;
  stats: ReturnType<typeof emptyClientStats>;
  recorder: HistoryRecorder;
}) {
  const results = new Map<string, Result>();
  const deadline = Date.now() + 60_000;
  const crashed = opts.server.crashed();
  crashed.catch(() => {});
  await Promise.race([
    crashed,
    Promise.all(
      Array.from({ length: opts.clients }, async (_, c) => {
        const client = createPaymentsClient({
          url: opts.url,
          stats: opts.stats,
          recorder: opts.recorder,
          link: { attemptTimeoutMs: 3_000, baseDelayMs: 50, maxDelayMs: 800, maxElapsedMs: 6_000 },
        });
        for (let i = c; i < opts.count; i += opts.clients) {
          const ref = `${opts.prefix}-${i}`;
          results.set(ref, await payUntilDone(client, { ref, amount: i + 1 }, opts.stats, deadline));
        }
      }),
    ),
  ]);
  return results;
}

/** Every committed payment is in the caller's hands, and every caller's payment is committed once. */
async function expectExactlyOnce(db: Kysely<any>, results: Map<string, Result>, count: number) {
  const ledger = await ledgerSummary(db);
  expect(results.size).toBe(count);
  expect(ledger).toEqual({ rows: count, distinctRefs: count, duplicatedRefs: 0 });
  const { rows } = await sql<{ ref: string; id: string }>`select ref, id::text as id from ledger`.execute(db);
  for (const row of rows) expect(results.get(row.ref)?.paymentId, row.ref).toBe(row.id);
  return ledger;
}

describe('database faults', () => {
  it.each([
    { label: 'transaction, Kysely path', mode: 'transaction', rawPool: false },
    { label: 'transaction, raw pg fast path', mode: 'transaction', rawPool: true },
    { label: 'lease, Kysely path', mode: 'lease', rawPool: false, leaseMs: 1_000, waitMs: 300 },
    { label: 'lease, raw pg fast path', mode: 'lease', rawPool: true, leaseMs: 1_000, waitMs: 300 },
  ] as const)(
    'stays exactly-once while the server’s database connections are terminated during requests ($label)',
    async ({ label, ...serverOptions }) => {
      const tdb: TestDatabase = await createTestDatabase(inject('pgAdminUrl'));
      cleanups.push(() => tdb.drop());
      await createLedger(tdb.db);
      const appName = `chaos-terminate-${randomUUID().slice(0, 8)}`;
      const server = new ServerProcess({ databaseUrl: tdb.url, appName, handlerDelayMs: 40, ...serverOptions });
      cleanups.push(() => server.stop());
      await server.start();
      const events = countEvents(server);
      const recorder = new HistoryRecorder(serverOptions.mode);
      const watching = recorder.watch(server);

      let rounds = 0;
      let terminated = 0;
      let running = true;
      const terminator = (async () => {
        // Bounded: at most 30 rounds, every 150 ms, only this server's connections.
        while (running && rounds < 30) {
          await sleep(150);
          const { rows } = await sql<{ n: number }>`
          select count(*) filter (where pg_terminate_backend(pid))::int as n
          from pg_stat_activity where application_name = ${appName} and datname = current_database()`.execute(tdb.db);
          rounds++;
          terminated += rows[0]?.n ?? 0;
        }
      })();
      const stats = emptyClientStats();
      const started = Date.now();
      const results = await traffic({
        server,
        url: `http://127.0.0.1:${server.port}`,
        clients: 10,
        count: 100,
        prefix: 'term',
        stats,
        recorder,
      });
      running = false;
      await terminator;
      events.stop();
      watching.stop();
      const verdict = await judgeRun(recorder, tdb.db, {
        label: `database-faults:terminate:${label}`,
        excuseUncommitted: 'its database connections were being terminated',
      });
      expect(violationList(verdict)).toEqual([]);

      const ledger = await expectExactlyOnce(tdb.db, results, 100);
      console.log(
        [
          `[chaos:pg-terminate:${label}] 10 clients, 100 payments, handler 40 ms, ${((Date.now() - started) / 1000).toFixed(1)} s`,
          `  faults: ${terminated} server connections terminated over ${rounds} rounds of pg_terminate_backend`,
          `  client: ${stats.attempts} attempts, ${stats.linkRetries} link retries, ${stats.replayed} replays, ${stats.callerResends} caller re-sends`,
          `  server: ${formatCounts(events.counts)}; process started ${server.starts} time(s)`,
          `  verified: ${ledger.rows} ledger rows, ${ledger.duplicatedRefs} duplicated, every caller holds the committed payment`,
        ].join('\n'),
      );
      expect(terminated).toBeGreaterThan(5);
      expect(server.starts).toBe(1);
    },
  );

  it.each([
    { label: 'Kysely path', rawPool: false },
    { label: 'raw pg fast path', rawPool: true },
  ])(
    'answers 503 store_unavailable while Postgres is down and recovers without a restart once it is back ($label)',
    async ({ label, rawPool }) => {
      const pgServer: EmbeddedPostgres = await startEmbeddedPostgres();
      cleanups.push(() => pgServer.stop());
      const admin = new pg.Client({ connectionString: pgServer.url });
      await admin.connect();
      await admin.query('create database chaos');
      await admin.end();
      const url = new URL(pgServer.url);
      url.pathname = '/chaos';
      const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
      pool.on('error', () => {});
      const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
      cleanups.push(() => db.destroy());
      await createLedger(db);

      const server = new ServerProcess({ databaseUrl: url.toString(), handlerDelayMs: 40, rawPool });
      cleanups.push(() => server.stop());
      await server.start();
      const events = countEvents(server);
      const recorder = new HistoryRecorder('transaction');
      const watching = recorder.watch(server);
      const stats = emptyClientStats();
      const started = Date.now();

      const outage = { ms: 0, probes: 0, storeUnavailable: 0, other: new Map<string, number>(), handlerRunsDuring: 0 };
      const outageRun = (async () => {
        // Mid-traffic, whatever the machine's speed: once 30 payments have started.
        while (stats.calls < 30) await sleep(20);
        const down = Date.now();
        await pgServer.pause();
        let enters = 0;
        const countEnter = (e: { ev: string }) => {
          if (e.ev === 'enter') enters++;
        };
        server.on('event', countEnter);
        // Probe with raw HTTP (no retries) for 2.5 s: each answer must say what happened.
        while (Date.now() - down < 2_500) {
          const res = await callRaw({
            port: server.port,
            path: 'payments.create',
            input: { ref: `probe-${outage.probes}`, amount: 1 },
            key: `"${randomUUID()}"`,
          });
          outage.probes++;
          if (res.status === 503 && res.reason === 'store_unavailable' && Number(res.headers['retry-after']) > 0) {
            outage.storeUnavailable++;
          } else {
            const label = `${res.status} ${res.reason ?? res.code ?? ''}`;
            outage.other.set(label, (outage.other.get(label) ?? 0) + 1);
          }
          await sleep(100);
        }
        server.off('event', countEnter);
        outage.handlerRunsDuring = enters;
        await pgServer.start();
        outage.ms = Date.now() - down;
      })();
      // Awaited below; a server crash would otherwise surface here first as an unhandled rejection.
      outageRun.catch(() => {});
      const results = await traffic({
        server,
        url: `http://127.0.0.1:${server.port}`,
        clients: 8,
        count: 120,
        prefix: 'outage',
        stats,
        recorder,
      });
      await outageRun;
      // After the outage, new calls go through on the same process.
      const after = await traffic({
        server,
        url: `http://127.0.0.1:${server.port}`,
        clients: 4,
        count: 20,
        prefix: 'after',
        stats,
        recorder,
      });
      events.stop();
      watching.stop();
      const verdict = await judgeRun(recorder, db, {
        label: `database-faults:outage:${label}`,
        excuseUncommitted: 'Postgres was stopped under it',
      });
      expect(violationList(verdict)).toEqual([]);
      for (const [ref, r] of after) results.set(ref, r);

      const ledger = await expectExactlyOnce(db, results, 140);
      console.log(
        [
          `[chaos:pg-outage:${label}] 8 clients, 120 payments, Postgres stopped for ${(outage.ms / 1000).toFixed(1)} s, then 20 more payments; ${((Date.now() - started) / 1000).toFixed(1)} s`,
          `  during the outage: ${outage.probes} probes, ${outage.storeUnavailable} answered 503 store_unavailable with Retry-After, others: ${formatCounts(outage.other)}, handler runs: ${outage.handlerRunsDuring}`,
          `  client: ${stats.attempts} attempts, ${stats.linkRetries} link retries, ${stats.replayed} replays, ${stats.callerResends} caller re-sends`,
          `  server: ${formatCounts(events.counts)}; process started ${server.starts} time(s)`,
          `  verified: ${ledger.rows} ledger rows, ${ledger.duplicatedRefs} duplicated, every caller holds the committed payment`,
        ].join('\n'),
      );
      expect(outage.probes).toBeGreaterThanOrEqual(3);
      expect(outage.storeUnavailable).toBe(outage.probes);
      expect(outage.handlerRunsDuring).toBe(0);
      expect(server.starts).toBe(1);
    },
  );
});
