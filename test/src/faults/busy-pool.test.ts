import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import type { Kysely } from 'kysely';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { createLedger } from '../harness/payments-app.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { chaosSeed, seededRandom } from '../harness/seeded-random.ts';
import { createPglite, type Instance, type ServerPath, startInstance } from './instances.ts';

const SEED = chaosSeed(1103);
const KEYS = 10;
const HANDLER_MS = 900;
const LEASE_MS = 300;
const POOL_MAX = 2;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

/**
 * 20 concurrent keyed calls — 10 keys, each sent twice at once — against servers whose pools hold 2 connections,
 * handlers of 900 ms (three leases long) and (lease mode) a 300 ms lease that must be renewed while the pool is taken by the handlers.
 */
async function busyRun(mode: 'transaction' | 'lease', path: ServerPath) {
  const recorder = new HistoryRecorder(mode);
  let tdb: TestDatabase | undefined;
  let db: Kysely<any>;
  if (path === 'pglite') {
    db = await createPglite();
    cleanups.push(() => db.destroy());
  } else {
    tdb = await createTestDatabase(inject('pgAdminUrl'));
    cleanups.push(() => tdb?.drop() ?? Promise.resolve());
    db = tdb.db;
    await createLedger(db);
  }
  const common = {
    path,
    recorder,
    mode,
    handlerDelayMs: HANDLER_MS,
    poolMax: POOL_MAX,
    ...(mode === 'lease' ? { lease: LEASE_MS } : {}),
    ...(tdb ? { url: tdb.url } : { pglite: db }),
  };
  // PGlite is one in-process database: one instance. On Postgres, two instances share it, as two app servers do.
  const instances: Instance[] = [];
  for (const name of path === 'pglite' ? ['A'] : ['A', 'B']) {
    const instance = await startInstance({ ...common, name });
    cleanups.push(() => instance.close());
    instances.push(instance);
  }
  const random = seededRandom(SEED + (mode === 'lease' ? 1 : 0) + (path === 'kysely' ? 2 : 0));
  const stats = emptyClientStats();
  const clients = instances.map((instance) =>
    createPaymentsClient({
      url: instance.url,
      stats,
      recorder,
      link: { attemptTimeoutMs: 5_000, baseDelayMs: 50, maxDelayMs: 500, maxElapsedMs: 20_000 },
    }),
  );
  const started = Date.now();
  const deadline = started + 30_000;
  // Settled, not awaited one by one: a call still refused at its deadline is reported with the key's history.
  const settled = await Promise.allSettled(
    Array.from({ length: KEYS }, (_, i) => {
      const key = `busy-${SEED}-${mode}-${path}-${i}`;
      const input = { ref: `busy-${i}`, amount: i + 1 };
      // Two copies at once; which instance each goes to is drawn from the seed.
      const first = Math.floor(random() * clients.length);
      return Promise.all(
        [0, 1].map((copy) => {
          const client = clients[(first + copy) % clients.length];
          if (!client) throw new Error('no client');
          return payUntilDone(client, input, stats, deadline, key);
        }),
      );
    }),
  );
  const unresolved = settled.flatMap((r, i) =>
    r.status === 'rejected' ? [`key ${i}: ${String(r.reason).slice(0, 120)}`] : [],
  );
  const verdict = await judgeRun(recorder, db, {
    label: `faults:busy-pool:${mode}:${path}`,
    ...(path === 'pglite' ? { pglite: true } : {}),
  });
  console.log(
    `[faults:busy-pool:${mode}:${path}] seed ${SEED}, ${KEYS} keys × 2 concurrent copies, ${instances.length} instance(s), pool max ${POOL_MAX}, handler ${HANDLER_MS} ms${mode === 'lease' ? `, lease ${LEASE_MS} ms` : ''}, ${((Date.now() - started) / 1000).toFixed(1)} s; ${stats.linkRetries} link retries, ${stats.callerResends} caller re-sends`,
  );
  return { verdict, unresolved };
}

describe('a pool smaller than the concurrency', () => {
  it.each([
    ['transaction', 'pool'],
    ['transaction', 'kysely'],
    ['transaction', 'pglite'],
    ['lease', 'pool'],
    ['lease', 'kysely'],
    ['lease', 'pglite'],
  ] as const)('runs each key once and answers every copy alike (%s mode, %s path)', async (mode, path) => {
    const { verdict, unresolved } = await busyRun(mode, path);
    expect(violationList(verdict)).toEqual([]);
    expect(unresolved).toEqual([]);
    expect(verdict.counts.calls).toBe(KEYS * 2);
    expect(verdict.counts.effects).toBe(KEYS);
  });
});
