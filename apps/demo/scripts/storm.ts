/**
 * `npm run demo:storm`: many concurrent clients pay through a misbehaving network against the running demo,
 * then the ledger is checked: one row per logical payment, nothing charged twice.
 *
 *   npm run demo:storm -- --payments 300 --clients 24 --fault-rate 0.5 --url http://localhost:3000
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { IdempotencyCallInfo } from '@trpc-idempotency/client';
import { getIdempotencyReason } from '@trpc-idempotency/client';
import { createDemoClient, type DemoClient } from '../src/client/createDemoClient';
import type { ConcreteFault } from '../src/network/faultModes';
import { flakyFetch, type NetworkAttempt } from '../src/network/flakyFetch';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.STORM_URL ?? `http://localhost:${process.env.PORT ?? 3000}` },
    payments: { type: 'string', default: '200' },
    clients: { type: 'string', default: '16' },
    'fault-rate': { type: 'string', default: '0.4' },
    double: { type: 'string', default: '0.2' },
    resends: { type: 'string', default: '5' },
  },
});

const url = new URL('/api/trpc', values.url).toString();
const paymentCount = positive('payments', values.payments);
const clientCount = positive('clients', values.clients);
const faultRate = Number(values['fault-rate']);
const doubleRate = Number(values.double);
const maxResends = positive('resends', values.resends);
const userId = `storm-${Date.now().toString(36)}`;

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer, got ${text}`);
  return value;
}

const stats = {
  httpAttempts: 0,
  statuses: new Map<string, number>(),
  faults: new Map<ConcreteFault, number>(),
  replayedAnswers: 0,
  replayedCalls: 0,
  conflicts: 0,
  doubles: 0,
  resends: 0,
  failed: 0,
};

function countAttempt(attempt: NetworkAttempt): void {
  stats.httpAttempts++;
  const outcome = String(attempt.outcome);
  stats.statuses.set(outcome, (stats.statuses.get(outcome) ?? 0) + 1);
  if (attempt.fault) stats.faults.set(attempt.fault, (stats.faults.get(attempt.fault) ?? 0) + 1);
  if (attempt.outcome === 409) stats.conflicts++;
  if (attempt.replayed.length > 0 && attempt.outcome !== 'lost') stats.replayedAnswers++;
}

/** One device: its own idempotency link (own retry budget) over its own flaky connection. */
function device(): DemoClient {
  return createDemoClient({
    url,
    userId,
    fetch: flakyFetch({ mode: () => 'chaos', chaosRate: faultRate, processingMs: 800, onAttempt: countAttempt }),
  });
}

/** One logical payment: the link retries each call; when a call still fails, resend it with the same key. */
async function pay(client: DemoClient, key: string, amountCents: number, description: string): Promise<void> {
  for (let round = 0; round <= maxResends; round++) {
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    try {
      await client.payments.create.mutate(
        { amountCents, description },
        { context: { idempotencyKey: key, idempotencyInfo: info } },
      );
      if (info.replayed) stats.replayedCalls++;
      return;
    } catch (error) {
      if (getIdempotencyReason(error) === 'payload_mismatch' || round === maxResends) {
        stats.failed++;
        console.error(`payment ${key} failed for good:`, error instanceof Error ? error.message : error);
        return;
      }
      stats.resends++;
    }
  }
}

async function worker(queue: number[]): Promise<void> {
  const tab = device();
  const secondTab = device();
  for (let index = queue.shift(); index !== undefined; index = queue.shift()) {
    const key = randomUUID();
    const amountCents = 100 + Math.floor(Math.random() * 50_000);
    const description = `storm #${index + 1}`;
    if (Math.random() < doubleRate) {
      // The same submission from two tabs at the same moment.
      stats.doubles++;
      await Promise.all([pay(tab, key, amountCents, description), pay(secondTab, key, amountCents, description)]);
    } else {
      await pay(tab, key, amountCents, description);
    }
  }
}

function table(rows: [string, string | number][]): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  const valueWidth = Math.max(...rows.map(([, value]) => String(value).length));
  const line = `+${'-'.repeat(width + 2)}+${'-'.repeat(valueWidth + 2)}+`;
  const body = rows.map(([label, value]) => `| ${label.padEnd(width)} | ${String(value).padStart(valueWidth)} |`);
  return [line, ...body, line].join('\n');
}

async function main(): Promise<void> {
  const observer = createDemoClient({ url, userId, fetch: (input, init) => fetch(input, init) });
  try {
    await observer.payments.ledger.query({ limit: 1 });
  } catch (error) {
    console.error(`No demo answering at ${values.url} (${error instanceof Error ? error.message : error}).`);
    console.error('Start it first in another terminal: npm run demo');
    process.exit(1);
  }

  console.log(
    `Storm: ${paymentCount} payments from ${clientCount} clients against ${values.url}, ` +
      `fault rate ${faultRate}, double submits ${doubleRate}, user ${userId}`,
  );
  const started = Date.now();
  const queue = Array.from({ length: paymentCount }, (_, index) => index);
  await Promise.all(Array.from({ length: clientCount }, () => worker(queue)));
  const seconds = ((Date.now() - started) / 1000).toFixed(1);

  const ledger = await observer.payments.ledger.query({ limit: 1 });
  const faults = [...stats.faults].map(([fault, count]) => `${fault} ${count}`).join(', ') || 'none';
  const statuses = [...stats.statuses].map(([status, count]) => `${status}×${count}`).join(' ');
  console.log(
    table([
      ['logical payments', paymentCount],
      ['  of which sent twice at once', stats.doubles],
      ['HTTP attempts', stats.httpAttempts],
      ['  faults injected', [...stats.faults.values()].reduce((a, b) => a + b, 0)],
      ['replays (HTTP answers marked replayed)', stats.replayedAnswers],
      ['replays (calls that ended replayed)', stats.replayedCalls],
      ['conflicts (409 in_progress)', stats.conflicts],
      ['calls resent after the link gave up', stats.resends],
      ['payments failed for good', stats.failed],
      ['ledger rows', ledger.rows],
      ['duplicates (rows sharing a key)', ledger.duplicates],
      ['seconds', seconds],
    ]),
  );
  console.log(`faults: ${faults}`);
  console.log(`attempt outcomes: ${statuses}`);

  const ok = ledger.duplicates === 0 && ledger.rows === paymentCount && stats.failed === 0;
  console.log(
    ok
      ? `OK: ${ledger.rows} ledger rows for ${paymentCount} logical payments, 0 charged twice.`
      : `FAILED: expected ${paymentCount} rows and 0 duplicates, got ${ledger.rows} rows, ${ledger.duplicates} duplicates, ${stats.failed} failed.`,
  );
  process.exit(ok ? 0 : 1);
}

await main();
