import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Backend, openBackend } from '../harness/backends.ts';
import { FaultProxy } from '../harness/fault-proxy.ts';
import { judgeRun, violationList } from '../harness/history-database.ts';
import { HistoryRecorder } from '../harness/history-recording.ts';
import { startPaymentsServer } from '../harness/in-process-server.ts';
import { ledgerSummary } from '../harness/ledger-checks.ts';
import { createPaymentsClient, emptyClientStats, payAction } from '../harness/payments-client.ts';
import { chaosSeed, seededRandom } from '../harness/seeded-random.ts';

const SEED = chaosSeed(20261206);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Postgres carries the load; SQLite in lease mode checks the same client view on another store and mode. */
const RUNS = [
  ['pg-pool', 'transaction', 400, 8],
  ['sqlite', 'lease', 240, 4],
] as const;

describe.each(RUNS)(
  'sessions that end while answers are lost, on %s (%s mode)',
  (backendName, mode, ACTIONS, USERS) => {
    let backend: Backend;
    let server: Awaited<ReturnType<typeof startPaymentsServer>>;
    let proxy: FaultProxy;
    const recorder = new HistoryRecorder(mode);
    /** Until when each user's session is over (the app's auth answers 401 meanwhile). */
    const endedUntil = new Map<string, number>();
    const signedIn = (user: string) => (endedUntil.get(user) ?? 0) <= Date.now();
    const random = seededRandom(SEED + 1);

    beforeAll(async () => {
      backend = await openBackend(backendName, inject('pgAdminUrl'));
      server = await startPaymentsServer({
        ...backend.via,
        mode,
        signedIn,
        onEnter: (info) => {
          recorder.enter(info);
          // A quarter of the payments outlive the session they started in (it expired, or the user signed out in
          // another tab): for 150–500 ms the app's auth answers 401, to this call's retries and to the next calls.
          if (random() < 0.25) endedUntil.set(info.scope.slice('user:'.length), Date.now() + 150 + random() * 350);
        },
        onEvent: (event) => recorder.middlewareEvent(event),
      });
      proxy = await new FaultProxy({ upstreams: [server.port], seed: SEED, faults: { drop: 0.15 } }).listen();
    });
    afterAll(async () => {
      await proxy?.close();
      await server?.close();
      await backend?.drop();
    });

    it(`no call whose key committed is reported failed, and each of ${ACTIONS} actions pays once`, async () => {
      const users = Array.from({ length: USERS }, (_, u) => `u${u}`);
      const stats = emptyClientStats();
      const started = Date.now();
      const deadline = started + 120_000;
      const outcomes: { ref: string; newKeys: number }[] = [];
      await Promise.all(
        users.map(async (user, u) => {
          const client = createPaymentsClient({
            url: proxy.url,
            stats,
            recorder,
            user,
            link: { attemptTimeoutMs: 1_000, baseDelayMs: 25, maxDelayMs: 400, maxElapsedMs: 6_000 },
          });
          const signedInAgain = async () => {
            while (!signedIn(user)) await sleep(20);
          };
          for (let i = u; i < ACTIONS; i += USERS) {
            const ref = `session-${i}`;
            const { newKeys } = await payAction(client, { ref, amount: i + 1 }, stats, deadline, signedInAgain);
            outcomes.push({ ref, newKeys });
          }
        }),
      );
      proxy.setFaults(undefined);

      const verdict = await judgeRun(recorder, backend.db, {
        label: `session-expiry:${backendName}:${mode}`,
        refPrefix: 'session-',
      });
      const ledger = await ledgerSummary(backend.db, 'session-');
      const calls = recorder.history.calls;
      // The case this run is for: an attempt got no answer, a later one of the same call was refused 401.
      const lostThenRefused = calls.filter((c) => {
        const lost = c.attempts.findIndex((a) => a.status === undefined);
        return lost >= 0 && c.attempts.slice(lost + 1).some((a) => a.status === 401);
      });
      const reported = (r: string) => calls.filter((c) => c.reported === r).length;
      console.log(
        [
          `[chaos:session-expiry:${backendName}:${mode}] seed ${SEED}, ${USERS} users, ${ACTIONS} actions in ${((Date.now() - started) / 1000).toFixed(1)} s`,
          `  proxy: ${proxy.stats.requests} requests, ${proxy.stats.drops} answers dropped after the server answered`,
          `  client: ${calls.length} logical calls (keys); ${lostThenRefused.length} lost an answer and were then refused 401; ${stats.callerResends} re-sends with the same key after an unknown outcome; ${reported('failed')} reported failed (refused before anything ran: paid again under a new key)`,
          `  verified: ${ledger.rows} ledger rows, ${ledger.distinctRefs} distinct actions, ${ledger.duplicatedRefs} duplicated`,
        ].join('\n'),
      );

      expect(violationList(verdict)).toEqual([]);
      expect(outcomes).toHaveLength(ACTIONS);
      expect(ledger).toEqual({ rows: ACTIONS, distinctRefs: ACTIONS, duplicatedRefs: 0 });
      // The faults met, or the run proves nothing: lost answers followed by a 401, and definitive 401s (nothing ran)
      // after which the user paid again under a new key.
      expect(lostThenRefused.length).toBeGreaterThan(0);
      expect(reported('failed')).toBeGreaterThan(0);
      expect(outcomes.some((o) => o.newKeys > 0)).toBe(true);
    }, 180_000);
  },
);
