import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Backend, openBackend, processDialect } from '../harness/backends.ts';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { countEvents, formatCounts, ledgerSummary } from '../harness/ledger-checks.ts';
import { PaymentProvider } from '../harness/payment-provider.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { chaosSeed, seededRandom } from '../harness/seeded-random.ts';
import { type ServerEvent, ServerProcess } from '../harness/server-process.ts';

const CLIENTS = 10;
const MAX_KILLS = 5;
const HANDLER_MS = 150;
const SEED = chaosSeed(6);

let provider: PaymentProvider;
beforeAll(async () => {
  provider = await new PaymentProvider().listen();
});
afterAll(async () => {
  await provider?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Kills the server with SIGKILL a few ms after a handler started (so mid-handler), every 10–25 handler
 * starts, at most `MAX_KILLS` times, and starts it again on the same port.
 */
function startKiller(server: ServerProcess, random: () => number) {
  const inFlight = new Set<string>();
  let sinceKill = 0;
  let nextKillAt = 10 + Math.floor(random() * 15);
  let pending: Promise<void> | undefined;
  let failure: unknown;
  const figures = { kills: 0, handlersKilledMidway: 0, takeoversOfLiveHolders: 0 };
  // Which server incarnation last started each key's handler: a takeover within the same incarnation means
  // a lease expired while its holder was alive (renewal fell behind), not after a kill.
  const enteredIn = new Map<string, number>();
  const onEvent = (e: ServerEvent) => {
    if (e.ev === 'leave') inFlight.delete(String(e.key));
    if (e.ev !== 'enter') return;
    const key = String(e.key);
    if (e.takeover && enteredIn.get(key) === server.starts) figures.takeoversOfLiveHolders++;
    enteredIn.set(key, server.starts);
    inFlight.add(key);
    sinceKill++;
    if (pending || figures.kills >= MAX_KILLS || sinceKill < nextKillAt) return;
    pending = (async () => {
      await sleep(Math.floor(random() * HANDLER_MS * 0.8));
      figures.kills++;
      figures.handlersKilledMidway += inFlight.size;
      await server.kill();
      inFlight.clear();
      await sleep(100);
      await startWithRetry(server);
      sinceKill = 0;
      nextKillAt = 10 + Math.floor(random() * 15);
      pending = undefined;
    })();
    pending.catch((error: unknown) => {
      failure ??= error;
    });
  };
  server.on('event', onEvent);
  return {
    figures,
    async stop() {
      server.off('event', onEvent);
      await pending?.catch(() => {});
      if (failure) throw failure;
    },
  };
}

/**
 * A restart that fails is retried twice: on a shared development machine the server package's dist/ can be
 * mid-rebuild for a moment. A server that cannot start three times in a row fails the test.
 */
async function startWithRetry(server: ServerProcess) {
  for (let attempt = 1; ; attempt++) {
    try {
      await server.start();
      return;
    } catch (error) {
      if (attempt >= 3) throw error;
      await sleep(1_000);
    }
  }
}

/**
 * Every backend a server process can run on, in both modes: Postgres on its fast path (transaction) and its
 * general path (lease) with the full load, the other dialects with half of it (their suites share the 20 min).
 */
const RUNS = [
  ['pg-pool', 'transaction', 120, {}],
  ['pg-kysely', 'lease', 120, { leaseMs: 1_000, waitMs: 300 }],
  ...(['mariadb', 'sqlite', 'libsql'] as const).flatMap((backend) => [
    [backend, 'transaction', 60, {}] as const,
    [backend, 'lease', 60, { leaseMs: 1_000, waitMs: 300 }] as const,
  ]),
] as const;

describe.each(RUNS)('server crash mid-handler on %s (%s mode)', (backendName, mode, PAYMENTS, modeOptions) => {
  let backend: Backend;
  let server: ServerProcess;

  beforeAll(async () => {
    backend = await openBackend(backendName, inject('pgAdminUrl'));
    server = new ServerProcess({
      databaseUrl: backend.target ?? '',
      dialect: processDialect(backendName),
      rawPool: backendName === 'pg-pool',
      mode,
      handlerDelayMs: HANDLER_MS,
      providerUrl: provider.url,
      ...modeOptions,
    });
    await server.start();
  });

  afterAll(async () => {
    await server?.stop();
    await backend?.drop();
  });

  it('writes each payment and its keyed charge exactly once while the server is SIGKILLed and restarted', async () => {
    const chargesBefore = provider.charges.length;
    const events = countEvents(server);
    const recorder = new HistoryRecorder(mode);
    const watching = recorder.watch(server);
    const killer = startKiller(server, seededRandom(SEED + (mode === 'lease' ? 1 : 0)));
    const stats = emptyClientStats();
    const started = Date.now();
    const deadline = started + 120_000;
    const results = new Map<string, { paymentId: string; chargeId: string | null; key: string }>();
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        const client = createPaymentsClient({
          url: `http://127.0.0.1:${server.port}`,
          stats,
          recorder,
          link: { attemptTimeoutMs: 3_000, baseDelayMs: 100, maxDelayMs: 1_000, maxElapsedMs: 8_000 },
        });
        for (let i = c; i < PAYMENTS; i += CLIENTS) {
          const ref = `${mode}-${i}`;
          const result = await payUntilDone(client, { ref, amount: i + 1, provider: true }, stats, deadline);
          results.set(ref, result);
        }
      }),
    );
    await killer.stop();
    events.stop();
    watching.stop();
    const elapsed = Date.now() - started;
    const verdict = await judgeRun(recorder, backend.db, { label: `server-crash:${backendName}:${mode}` });

    const ledger = await ledgerSummary(backend.db);
    const charges = provider.charges.slice(chargesBefore);
    const keyed = charges.filter((c) => c.key !== undefined);
    const unkeyed = charges.filter((c) => c.key === undefined);
    const perRef = new Map<string, number>();
    for (const c of unkeyed) perRef.set(c.ref, (perRef.get(c.ref) ?? 0) + 1);
    const repeatedRefs = [...perRef.values()].filter((n) => n > 1).length;
    const { kills, handlersKilledMidway, takeoversOfLiveHolders } = killer.figures;
    console.log(
      [
        `[chaos:server-crash:${backendName}:${mode}] seed ${SEED}, ${CLIENTS} clients, ${PAYMENTS} payments, handler ${HANDLER_MS} ms${'leaseMs' in modeOptions ? `, lease ${modeOptions.leaseMs} ms, wait ${modeOptions.waitMs} ms` : ''}, ${(elapsed / 1000).toFixed(1)} s`,
        `  faults: ${kills} SIGKILLs with ${handlersKilledMidway} handlers mid-flight, ${server.starts} server starts; ${takeoversOfLiveHolders} takeovers of a holder that was still alive`,
        `  client: ${stats.attempts} attempts, ${stats.linkRetries} link retries, ${stats.replayed} replays, ${stats.callerResends} caller re-sends`,
        `  server: ${formatCounts(events.counts)}`,
        `  verified: ${ledger.rows} ledger rows for ${ledger.distinctRefs} payments (${ledger.duplicatedRefs} duplicated); keyed provider charges ${keyed.length} for ${PAYMENTS} payments`,
        `  measured: unkeyed provider charges ${unkeyed.length} for ${PAYMENTS} payments: ${unkeyed.length - PAYMENTS} repeats on ${repeatedRefs} payments (${((repeatedRefs / PAYMENTS) * 100).toFixed(1)}%)`,
      ].join('\n'),
    );

    // Per key: one execution no kill excuses, one ledger row, one answer, nothing stuck.
    expect(violationList(verdict)).toEqual([]);
    expect(verdict.counts.excused).toBeGreaterThan(0);
    expect(results.size).toBe(PAYMENTS);
    expect(ledger).toEqual({ rows: PAYMENTS, distinctRefs: PAYMENTS, duplicatedRefs: 0 });
    const rows = await backend.db.selectFrom('ledger').select(['ref', 'id']).execute();
    for (const row of rows) expect(results.get(String(row.ref))?.paymentId, String(row.ref)).toBe(String(row.id));
    // The keyed external effect: one charge per payment, and the caller holds that very charge.
    expect(keyed.length).toBe(PAYMENTS);
    expect(new Set(keyed.map((c) => c.ref)).size).toBe(PAYMENTS);
    for (const c of keyed) expect(results.get(c.ref)?.chargeId, c.ref).toBe(c.chargeId);
    // The unkeyed one ran at least once per payment; repeats are measured above, not promised away.
    expect(perRef.size).toBe(PAYMENTS);
    // Renewal keeps a live holder's lease: only claims of killed processes are taken over.
    expect(takeoversOfLiveHolders).toBe(0);
    expect(kills).toBeGreaterThanOrEqual(3);
    expect(handlersKilledMidway).toBeGreaterThan(0);
  }, 180_000);
});
