import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { type Kysely, sql } from 'kysely';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { createLedger } from '../harness/payments-app.ts';
import { createPaymentsClient, emptyClientStats, payUntilDone } from '../harness/payments-client.ts';
import { chaosSeed } from '../harness/seeded-random.ts';
import { ServerProcess } from '../harness/server-process.ts';

const SEED = chaosSeed(1105);
const HOUR = 3_600_000;
const TTL_MS = 4_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

/** Waits (bounded) until the database's own clock says the key's row has expired. */
async function untilExpiredInDatabase(db: Kysely<any>, key: string) {
  for (let i = 0; i < 200; i++) {
    const { rows } = await sql<{ expired: boolean }>`
      select expires_at <= clock_timestamp() as expired from idempotency_keys where key = ${key}`.execute(db);
    if (rows[0]?.expired) return;
    await sleep(100);
  }
  throw new Error(`the row of ${key} did not expire by the database clock`);
}

/**
 * Two app servers whose clocks are an hour off the database's (one behind, one ahead) and one whose clock is
 * right, on one database, `ttl` 4 s. Leases and expiry are the database's: a skewed server must neither lose a
 * live lease nor keep answering a result the database has already expired and another server has replaced.
 */
describe.each([
  ['transaction', false],
  ['transaction', true],
  ['lease', false],
  ['lease', true],
] as const)('an app clock skewed against the database (%s mode, pool fast path: %s)', (mode, rawPool) => {
  it('follows the database clock for leases and for expiry, however far the app clock is off', async () => {
    const tdb: TestDatabase = await createTestDatabase(inject('pgAdminUrl'));
    cleanups.push(() => tdb.drop());
    await createLedger(tdb.db);
    const recorder = new HistoryRecorder(mode);
    const common = { databaseUrl: tdb.url, mode, rawPool, ttlMs: TTL_MS, leaseMs: 300, poolMax: 4 } as const;
    const right = new ServerProcess({ ...common, instance: 'right' });
    const skewed = [-HOUR, HOUR].map(
      (clockSkewMs) => new ServerProcess({ ...common, instance: `skew${clockSkewMs < 0 ? '-' : '+'}1h`, clockSkewMs }),
    );
    const servers = [right, ...skewed];
    for (const s of servers) cleanups.push(() => s.stop());
    await Promise.all(servers.map((s) => s.start()));
    const watching = recorder.watch(...servers);
    const stats = emptyClientStats();
    const link = { attemptTimeoutMs: 5_000, baseDelayMs: 50, maxDelayMs: 500, maxElapsedMs: 15_000 };
    const client = (s: ServerProcess) =>
      createPaymentsClient({ url: `http://127.0.0.1:${s.port}`, stats, recorder, link });
    const onRight = client(right);
    const deadline = Date.now() + 60_000;
    const started = Date.now();

    for (const [i, s] of skewed.entries()) {
      const onSkewed = client(s);
      // A live lease held by the skewed server (a 1.2 s handler, lease 300 ms) is not taken over by the other.
      const leaseKey = `skew-lease-${SEED}-${i}`;
      const long = { ref: `lease-${i}`, amount: 1, delayMs: 1_200 };
      const holder = payUntilDone(onSkewed, long, stats, deadline, leaseKey);
      await sleep(400);
      await Promise.all([holder, payUntilDone(onRight, long, stats, deadline, leaseKey)]);

      // A result the skewed server executed and cached expires when the database says so.
      const key = `skew-expiry-${SEED}-${i}`;
      const input = { ref: `expiry-${i}`, amount: 2 };
      await payUntilDone(onSkewed, input, stats, deadline, key);
      await payUntilDone(onSkewed, input, stats, deadline, key);
      await payUntilDone(onRight, input, stats, deadline, key);
      await untilExpiredInDatabase(tdb.db, key);
      // The key's second life: the right server finds it expired and runs it again; from now on that is the answer.
      recorder.expire('user:alice', key);
      await payUntilDone(onRight, input, stats, deadline, key);
      await payUntilDone(onSkewed, input, stats, deadline, key);
    }
    watching.stop();
    const verdict = await judgeRun(recorder, tdb.db, {
      label: `faults:clock-skew:${mode}:${rawPool ? 'pool' : 'kysely'}`,
    });
    console.log(
      `[faults:clock-skew:${mode}:${rawPool ? 'pool' : 'kysely'}] seed ${SEED}, app clocks -1 h and +1 h, ttl ${TTL_MS} ms, ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    expect(violationList(verdict)).toEqual([]);
  });
});
