import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Backend, openBackend, processDialect } from '../harness/backends.ts';
import { FaultProxy } from '../harness/fault-proxy.ts';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { countEvents, formatCounts, ledgerSummary } from '../harness/ledger-checks.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { ProviderProcess } from '../harness/provider-process.ts';
import { chaosSeed, seededRandom } from '../harness/seeded-random.ts';
import { type ServerEvent, ServerProcess } from '../harness/server-process.ts';

const CLIENTS = 10;
const INSTANCES = 2;
/** Ms the handler spends inside its steps (a third after each provider call): faults land between steps. */
const HANDLER_MS = 90;
const LEASE_MS = 1_000;
const MAX_FAULTS = 8;
const SEED = chaosSeed(31);
const STEPS = ['reserve', 'charge', 'notify'];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Every 10–25 handler starts, one holder is cut off a few ms into its handler (so mid-step): SIGKILLed and
 * restarted, or frozen (SIGSTOP) for 1.5 leases, long enough for another instance to take its key over, then thawed
 * (its stale steps and completion must be fenced off). At most MAX_FAULTS times.
 */
function startFaults(servers: ServerProcess[], random: () => number) {
  let since = 0;
  let next = 10 + Math.floor(random() * 15);
  let pending: Promise<void> | undefined;
  let failure: unknown;
  const figures = { kills: 0, pauses: 0 };
  const onEvent = (server: ServerProcess) => (e: ServerEvent) => {
    if (e.ev !== 'enter') return;
    since++;
    if (pending || figures.kills + figures.pauses >= MAX_FAULTS || since < next) return;
    pending = (async () => {
      await sleep(Math.floor(random() * HANDLER_MS));
      if (random() < 0.5) {
        figures.kills++;
        await server.kill();
        await sleep(100);
        await server.start();
      } else {
        figures.pauses++;
        server.pause();
        await sleep(LEASE_MS * 1.5);
        server.resume();
      }
      since = 0;
      next = 10 + Math.floor(random() * 15);
      pending = undefined;
    })();
    pending.catch((error: unknown) => {
      failure ??= error;
    });
  };
  const listeners = servers.map((s) => {
    const listener = onEvent(s);
    s.on('event', listener);
    return listener;
  });
  return {
    figures,
    async stop() {
      servers.forEach((s, i) => {
        s.off('event', listeners[i]!);
      });
      await pending?.catch(() => {});
      if (failure) throw failure;
    },
  };
}

/** 1,050 logical calls in all: 350 per dialect. */
const RUNS = [
  ['pg-kysely', 350],
  ['mariadb', 350],
  ['sqlite', 350],
] as const;

describe.each(RUNS)('durable steps under crashes, pauses and lost answers on %s', (backendName, PAYMENTS) => {
  let backend: Backend;
  let provider: ProviderProcess;
  let servers: ServerProcess[] = [];
  let proxy: FaultProxy;

  beforeAll(async () => {
    backend = await openBackend(backendName, inject('pgAdminUrl'));
    provider = await new ProviderProcess().start();
    servers = Array.from(
      { length: INSTANCES },
      (_, i) =>
        new ServerProcess({
          databaseUrl: backend.target ?? '',
          dialect: processDialect(backendName),
          mode: 'lease',
          leaseMs: LEASE_MS,
          waitMs: 300,
          instance: `i${i}`,
          handlerDelayMs: HANDLER_MS,
          providerUrl: provider.url,
          poolMax: 5,
        }),
    );
    for (const server of servers) await server.start();
    proxy = await new FaultProxy({
      upstreams: servers.map((s) => s.port),
      seed: SEED,
      faults: { drop: 0.05 },
    }).listen();
  });

  afterAll(async () => {
    await proxy?.close();
    await Promise.all(servers.map((s) => s.stop()));
    await provider?.stop();
    await backend?.drop();
  });

  it('makes each step of each call take effect once at a provider that honours keys', async () => {
    const events = countEvents(...servers);
    const recorder = new HistoryRecorder('lease');
    const watching = recorder.watch(...servers);
    const faults = startFaults(servers, seededRandom(SEED));
    const stats = emptyClientStats();
    const started = Date.now();
    const deadline = started + 240_000;
    const results = new Map<string, { chargeId: string | null; paymentId: string }>();
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        const client = createPaymentsClient({
          url: `http://127.0.0.1:${proxy.port}`,
          stats,
          recorder,
          link: { attemptTimeoutMs: 3_000, baseDelayMs: 100, maxDelayMs: 1_000, maxElapsedMs: 8_000 },
        });
        for (let i = c; i < PAYMENTS; i += CLIENTS) {
          const ref = `steps-${i}`;
          results.set(ref, await payUntilDone(client, { ref, amount: i + 1, steps: true }, stats, deadline));
        }
      }),
    );
    await faults.stop();
    events.stop();
    watching.stop();
    const elapsed = Date.now() - started;
    const verdict = await judgeRun(recorder, backend.db, {
      label: `durable-steps:${backendName}`,
      excuseUncommitted: 'its holder was frozen past its lease, taken over and fenced off',
    });
    const ledger = await ledgerSummary(backend.db);
    const { charges, calls } = await provider.ledger();
    const keyed = charges.filter((ch) => ch.key !== undefined);
    const unkeyed = charges.filter((ch) => ch.key === undefined);
    const keyedPerStep = new Map<string, number>();
    for (const ch of keyed) keyedPerStep.set(ch.ref, (keyedPerStep.get(ch.ref) ?? 0) + 1);
    const unkeyedPerStep = new Map<string, number>();
    for (const ch of unkeyed) unkeyedPerStep.set(ch.ref, (unkeyedPerStep.get(ch.ref) ?? 0) + 1);
    const repeatedSteps = [...unkeyedPerStep.values()].filter((n) => n > 1).length;
    const { kills, pauses } = faults.figures;
    console.log(
      [
        `[chaos:durable-steps:${backendName}] seed ${SEED}, ${CLIENTS} clients, ${INSTANCES} instances, ${PAYMENTS} calls of 3 steps, handler ${HANDLER_MS} ms, lease ${LEASE_MS} ms, ${(elapsed / 1000).toFixed(1)} s`,
        `  faults: ${kills} SIGKILLs, ${pauses} SIGSTOPs of 1.5 leases, ${proxy.stats.drops} answers dropped`,
        `  client: ${stats.attempts} attempts, ${stats.linkRetries} link retries, ${stats.replayed} replays, ${stats.callerResends} caller re-sends`,
        `  server: ${formatCounts(events.counts)}`,
        `  provider: ${calls} calls; keyed effects ${keyed.length} for ${PAYMENTS * 3} steps (${[...keyedPerStep.values()].filter((n) => n > 1).length} duplicated)`,
        `  measured: unkeyed effects ${unkeyed.length} for ${PAYMENTS * 3} steps: ${unkeyed.length - PAYMENTS * 3} repeats on ${repeatedSteps} steps`,
      ].join('\n'),
    );

    expect(violationList(verdict)).toEqual([]);
    expect(results.size).toBe(PAYMENTS);
    expect(ledger).toEqual({ rows: PAYMENTS, distinctRefs: PAYMENTS, duplicatedRefs: 0 });
    // Each step of each call: exactly one effect at the keyed provider, and the caller holds those very effects.
    expect(keyedPerStep.size).toBe(PAYMENTS * 3);
    expect([...keyedPerStep.values()].every((n) => n === 1)).toBe(true);
    const effectOf = new Map(keyed.map((ch) => [ch.ref, ch.chargeId]));
    for (const [ref, result] of results) {
      expect(result.chargeId, ref).toBe(STEPS.map((step) => effectOf.get(`${ref}/${step}`)).join(','));
    }
    expect(kills + pauses).toBeGreaterThanOrEqual(3);
    expect(proxy.stats.drops).toBeGreaterThan(0);
  }, 300_000);
});
