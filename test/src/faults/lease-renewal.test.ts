import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { createLedger } from '../harness/payments-app.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { chaosSeed } from '../harness/seeded-random.ts';
import { startInstance } from './instances.ts';

const SEED = chaosSeed(1104);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/**
 * The reported defect: instance A (pool max 1, lease 300 ms) runs a 1.5 s handler, so its only connection is
 * held by the work its lease protects; instance B (pool max 4) gets the same call 800 ms later. A renewal that
 * waits behind the handler lets the lease lapse while A is alive, and B runs the handler a second time.
 */
describe('lease renewal while the handler holds the whole pool', () => {
  it.each([
    ['lease', 'pool'],
    ['lease', 'kysely'],
    ['transaction', 'pool'],
    ['transaction', 'kysely'],
  ] as const)('never lets a second instance run a live holder’s call again (%s mode, %s path)', async (mode, path) => {
    const tdb: TestDatabase = await createTestDatabase(inject('pgAdminUrl'));
    cleanups.push(() => tdb.drop());
    await createLedger(tdb.db);
    const recorder = new HistoryRecorder(mode);
    const common = { path, url: tdb.url, recorder, mode, lease: 300 } as const;
    const a = await startInstance({ ...common, name: 'A', poolMax: 1 });
    cleanups.push(() => a.close());
    const b = await startInstance({ ...common, name: 'B', poolMax: 4 });
    cleanups.push(() => b.close());
    const stats = emptyClientStats();
    const link = { attemptTimeoutMs: 5_000, baseDelayMs: 50, maxDelayMs: 500, maxElapsedMs: 20_000 };
    const clientA = createPaymentsClient({ url: a.url, stats, recorder, link });
    const clientB = createPaymentsClient({ url: b.url, stats, recorder, link });
    const key = `renewal-${SEED}-${mode}-${path}`;
    const input = { ref: 'renewal', amount: 1, delayMs: 1_500 };
    const deadline = Date.now() + 40_000;
    const started = Date.now();
    const original = payUntilDone(clientA, input, stats, deadline, key);
    await sleep(800);
    const duplicate = payUntilDone(clientB, input, stats, deadline, key);
    const [fromA, fromB] = await Promise.all([original, duplicate]);
    const verdict = await judgeRun(recorder, tdb.db, { label: `faults:lease-renewal:${mode}:${path}` });
    console.log(
      `[faults:lease-renewal:${mode}:${path}] seed ${SEED}: A answered run ${fromA.run}, B answered run ${fromB.run}; ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    expect(violationList(verdict)).toEqual([]);
    expect(verdict.counts.executions).toBe(1);
  });
});
