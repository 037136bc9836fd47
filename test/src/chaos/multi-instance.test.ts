import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Backend, openBackend, processDialect } from '../harness/backends.ts';
import { FaultProxy } from '../harness/fault-proxy.ts';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { countEvents, formatCounts, ledgerSummary } from '../harness/ledger-checks.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { chaosSeed } from '../harness/seeded-random.ts';
import { type ServerEvent, ServerProcess } from '../harness/server-process.ts';

const INSTANCES = 3;
const SEED = chaosSeed(4);

/**
 * Three processes on one database: Postgres with the full load (transaction mode on the general path, lease mode
 * on the fast path), MariaDB and SQLite / libSQL (three processes on one WAL file) with 60 payments in each mode.
 */
const LEASE = { leaseMs: 2_000, waitMs: 1_000 } as const;
const RUNS = [
  ['pg-kysely', 'transaction', 150, {}],
  ['pg-pool', 'lease', 100, LEASE],
  ...(['mariadb', 'sqlite', 'libsql'] as const).flatMap((backend) => [
    [backend, 'transaction', 60, {}] as const,
    [backend, 'lease', 60, LEASE] as const,
  ]),
] as const;

describe.each(RUNS)(
  'several server instances sharing one database on %s (%s mode)',
  (backendName, mode, payments, modeOptions) => {
    let backend: Backend;
    let servers: ServerProcess[] = [];
    let proxy: FaultProxy;

    beforeAll(async () => {
      backend = await openBackend(backendName, inject('pgAdminUrl'));
      servers = Array.from(
        { length: INSTANCES },
        (_, i) =>
          new ServerProcess({
            databaseUrl: backend.target ?? '',
            dialect: processDialect(backendName),
            rawPool: backendName === 'pg-pool',
            mode,
            instance: `i${i}`,
            handlerDelayMs: 60,
            logHits: true,
            // Small pools: three instances share one Postgres with whatever else CI runs at the same time.
            poolMax: 5,
            ...modeOptions,
          }),
      );
      // Started together: their concurrent migrate() calls are part of what is tested.
      await Promise.all(servers.map((s) => s.start()));
      proxy = await new FaultProxy({
        upstreams: servers.map((s) => s.port),
        seed: SEED,
        faults: { drop: 0.05 },
      }).listen();
    });

    afterAll(async () => {
      await proxy?.close();
      await Promise.all(servers.map((s) => s.stop()));
      await backend?.drop();
    });

    it('executes once per key when three copies of each call hit different instances at once', async () => {
      const events = countEvents(...servers);
      const recorder = new HistoryRecorder(mode);
      const watching = recorder.watch(...servers);
      const hitsByKey = new Map<string, Set<string>>();
      const listeners = servers.map((s, i) => {
        const listener = (e: ServerEvent) => {
          if (e.ev !== 'hit') return;
          const key = String(e.key).replaceAll('"', '');
          const set = hitsByKey.get(key) ?? new Set<string>();
          set.add(`i${i}`);
          hitsByKey.set(key, set);
        };
        s.on('event', listener);
        return () => s.off('event', listener);
      });
      const stats = emptyClientStats();
      // Three independent clients, as three browser tabs or three app servers would be.
      const clients = Array.from({ length: 3 }, () =>
        createPaymentsClient({
          url: proxy.url,
          stats,
          recorder,
          link: { attemptTimeoutMs: 4_000, baseDelayMs: 50, maxDelayMs: 800, maxElapsedMs: 15_000 },
        }),
      );
      const started = Date.now();
      const deadline = started + 100_000;
      const outcomes = new Map<string, string[]>();
      const lanes = 10;
      await Promise.all(
        Array.from({ length: lanes }, async (_, lane) => {
          for (let i = lane; i < payments; i += lanes) {
            const ref = `${mode}-${i}`;
            const key = randomUUID();
            const copies = await Promise.all(
              clients.map((client) =>
                payUntilDone(client, { ref, amount: i + 1 }, stats, deadline, key).then((r) => r.paymentId),
              ),
            );
            outcomes.set(ref, copies);
          }
        }),
      );
      for (const off of listeners) off();
      events.stop();
      watching.stop();
      const verdict = await judgeRun(recorder, backend.db, { label: `multi-instance:${backendName}:${mode}` });

      const ledger = await ledgerSummary(backend.db);
      const spread = [...hitsByKey.values()].filter((s) => s.size >= 2).length;
      const perInstance = new Map<string, number>();
      for (const { instance } of await backend.db.selectFrom('ledger').select('instance').execute()) {
        perInstance.set(String(instance), (perInstance.get(String(instance)) ?? 0) + 1);
      }
      const rows = [...perInstance].sort().map(([instance, n]) => ({ instance, n }));
      console.log(
        [
          `[chaos:multi-instance:${backendName}:${mode}] ${INSTANCES} instances behind a round-robin proxy, ${payments} payments × 3 concurrent copies with one key, ${((Date.now() - started) / 1000).toFixed(1)} s`,
          `  proxy: ${proxy.stats.requests} requests, per instance ${proxy.stats.perUpstream.join('/')}, ${proxy.stats.drops} responses dropped`,
          `  spread: ${spread} of ${hitsByKey.size} keys reached 2 or more instances`,
          `  client: ${stats.attempts} attempts, ${stats.linkRetries} link retries, ${stats.replayed} replays, ${stats.callerResends} caller re-sends`,
          `  server: ${formatCounts(events.counts)}; executions per instance: ${rows.map((r) => `${r.instance} ${r.n}`).join(', ')}`,
          `  verified: ${ledger.rows} ledger rows, ${ledger.duplicatedRefs} duplicated; all 3 copies of every call got the same payment`,
        ].join('\n'),
      );
      expect(violationList(verdict)).toEqual([]);
      expect(verdict.counts.calls).toBe(payments * 3);
      expect(ledger).toEqual({ rows: payments, distinctRefs: payments, duplicatedRefs: 0 });
      for (const [ref, copies] of outcomes) expect(new Set(copies).size, ref).toBe(1);
      expect(spread).toBeGreaterThan(payments * 0.8);
      expect(rows.length).toBe(INSTANCES);
    }, 150_000);
  },
);
