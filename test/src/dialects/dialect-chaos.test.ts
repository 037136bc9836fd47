import { afterAll, describe, expect, it } from 'vitest';
import { type Backend, DIALECTS, openBackend } from '../harness/backends.ts';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { ledgerSummary } from '../harness/ledger-checks.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { ServerProcess } from '../harness/server-process.ts';

/**
 * The storm on each non-Postgres dialect (Postgres has its own in the server suite). SIGKILL mid-handler, lost
 * responses and several instances run on every dialect in test/src/chaos, parameterized there.
 */
describe.each(DIALECTS)('a storm of duplicates across processes on %s', (dialect) => {
  const opened: { backend: Backend; servers: ServerProcess[] }[] = [];
  afterAll(async () => {
    for (const { backend, servers } of opened) {
      await Promise.allSettled(servers.map((s) => s.stop()));
      await backend.drop();
    }
  });

  it.each(['transaction', 'lease'] as const)(
    'runs 200 concurrent duplicates over two server processes on one database exactly once, 200 identical answers (%s mode)',
    async (mode) => {
      const backend = await openBackend(dialect);
      const servers = ['i0', 'i1'].map(
        (instance) =>
          new ServerProcess({
            databaseUrl: backend.target ?? '',
            dialect,
            instance,
            mode,
            waitMs: 30_000,
            handlerDelayMs: 200,
          }),
      );
      opened.push({ backend, servers });
      // One at a time: migrate() runs at each start (the concurrent case is the multi-instance suite's).
      for (const server of servers) await server.start();
      const recorder = new HistoryRecorder(mode);
      const watching = recorder.watch(...servers);
      const stats = emptyClientStats();
      const clients = servers.map((s) =>
        createPaymentsClient({
          url: `http://127.0.0.1:${s.port}`,
          stats,
          recorder,
          link: { attemptTimeoutMs: 40_000, baseDelayMs: 50, maxDelayMs: 400, maxElapsedMs: 60_000 },
        }),
      );
      const deadline = Date.now() + 90_000;
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          payUntilDone(clients[i % 2]!, { ref: 'storm', amount: 1 }, stats, deadline, `storm-${mode}`).then((r) =>
            JSON.stringify(r),
          ),
        ),
      );
      watching.stop();
      const verdict = await judgeRun(recorder, backend.db, { label: `storm:${dialect}:${mode}` });
      expect(violationList(verdict)).toEqual([]);
      expect(verdict.counts.calls).toBe(200);
      expect(verdict.counts.executions).toBe(1);
      expect(new Set(answers).size).toBe(1);
      expect(await ledgerSummary(backend.db)).toEqual({ rows: 1, distinctRefs: 1, duplicatedRefs: 0 });
    },
  );
});
