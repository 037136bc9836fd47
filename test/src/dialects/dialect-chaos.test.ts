import { afterAll, describe, expect, it } from 'vitest';
import { chaosSeed, seededRandom } from '../harness/seeded-random.ts';
import { type CallResult, callRaw } from '../harness/trpc-http.ts';
import { DIALECTS, type DialectDatabase, ledgerCounts, openDialectDatabase } from './dialect-databases.ts';
import { DialectServer } from './dialect-server.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SEED = chaosSeed(12);

/**
 * One logical payment: the same key until a 200 answer (a client's retry loop), for at most 90 s — a restart
 * through tsx takes seconds on a busy machine.
 */
async function payUntilDone(port: () => number, key: string, ref: string, random: () => number): Promise<CallResult> {
  let last: CallResult | Error | undefined;
  for (const end = Date.now() + 90_000; Date.now() < end; ) {
    try {
      last = await callRaw({ port: port(), path: 'payments.create', input: { ref, amount: 1 }, key });
      if (last.status === 200) return last;
    } catch (error) {
      last = error as Error; // refused or reset: the server is down or was killed mid-request
    }
    await sleep(50 + Math.floor(random() * 150));
  }
  throw new Error(`payment ${ref} never succeeded: ${last instanceof Error ? last.message : last?.body}`);
}

describe.each(DIALECTS)('across processes on %s', (dialect) => {
  const opened: { database: DialectDatabase; servers: DialectServer[] }[] = [];
  afterAll(async () => {
    for (const { database, servers } of opened) {
      await Promise.allSettled(servers.map((s) => s.kill()));
      await database.drop();
    }
  });
  const setUp = async (
    count: number,
    opts: { waitMs?: number; handlerDelayMs?: number; mode?: 'transaction' | 'lease'; leaseMs?: number } = {},
  ) => {
    const database = await openDialectDatabase(dialect);
    const servers = Array.from(
      { length: count },
      (_, i) => new DialectServer({ dialect, target: database.target, instance: `i${i}`, ...opts }),
    );
    opened.push({ database, servers });
    // One at a time: migrate() runs at each start.
    for (const server of servers) await server.start();
    return { database, servers };
  };

  it('runs a storm of 200 duplicates over two server processes on one database exactly once, 200 identical answers', async () => {
    const { database, servers } = await setUp(2, { waitMs: 30_000, handlerDelayMs: 200 });
    const random = seededRandom(SEED);
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        payUntilDone(() => servers[i % 2]!.port, 'storm-key', 'storm', random).then((r) => JSON.stringify(r.data)),
      ),
    );
    expect(new Set(answers).size).toBe(1);
    expect(await ledgerCounts(database.db)).toEqual({ rows: 1, refs: 1, duplicated: [] });
  });

  // Lease mode: a killed holder's claim stays until its lease (1 s here) runs out, then a retry takes it over.
  it.each(['transaction', 'lease'] as const)(
    `survives SIGKILL mid-handler in %s mode with no payment run twice (seed ${SEED})`,
    async (mode) => {
      const { database, servers } = await setUp(1, { waitMs: 2_000, handlerDelayMs: 150, mode, leaseMs: 1_000 });
      const server = servers[0]!;
      const random = seededRandom(SEED);
      let enters = 0;
      let nextKill = 5;
      let killing: Promise<void> | undefined;
      server.on('event', (e) => {
        if (e.ev !== 'enter' || killing || server.kills >= 4 || ++enters < nextKill) return;
        killing = (async () => {
          await sleep(Math.floor(random() * 100));
          await server.kill();
          await sleep(100);
          await server.start();
          enters = 0;
          nextKill = 5 + Math.floor(random() * 6);
          killing = undefined;
        })();
        killing.catch(() => {}); // a failed restart shows as payments that never succeed
      });
      const payments = Array.from({ length: 40 }, (_, i) => ({ key: `chaos-${i}`, ref: `ref-${i}` }));
      const queue = [...payments];
      const answers = new Map<string, string>();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let p = queue.shift(); p; p = queue.shift()) {
            const r = await payUntilDone(() => server.port, p.key, p.ref, random);
            answers.set(p.ref, JSON.stringify(r.data));
            // The same key again answers the same (a replay, not a second run).
            expect(JSON.stringify((await payUntilDone(() => server.port, p.key, p.ref, random)).data)).toBe(
              answers.get(p.ref),
            );
          }
        }),
      );
      await killing;
      console.log(`[${dialect}, ${mode}] seed ${SEED}: ${server.kills} SIGKILLs mid-handler, ${answers.size} payments`);
      expect(server.kills).toBeGreaterThan(0);
      expect(await ledgerCounts(database.db)).toEqual({ rows: 40, refs: 40, duplicated: [] });
    },
  );
});
