import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { type Backend, openBackend } from '../harness/backends.ts';
import { type ServerEvent, ServerProcess } from '../harness/server-process.ts';
import { callRaw } from '../harness/trpc-http.ts';

const PROCESSES = 4;
const KEYS = 20;

/**
 * Lease mode on one SQLite / libSQL WAL file shared by four server processes, a short lease (300 ms) and the same
 * keys sent to every process at once: the write lock is contended by every claim and renewal, and renewals come
 * late. No process dies, so each key's handler (an outside effect) must run once: a live holder never gives its
 * key up because of write-lock contention once its handler ran, and is never taken over after it started.
 */
describe.each(['sqlite', 'libsql'] as const)('lease mode across processes on one %s file', (dialect) => {
  let backend: Backend | undefined;
  let servers: ServerProcess[] = [];
  afterAll(async () => {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await backend?.drop();
  });

  it('runs each key once with every holder alive (4 processes × the same 20 keys, lease 300 ms, handler 100 ms)', async () => {
    backend = await openBackend(dialect);
    servers = Array.from(
      { length: PROCESSES },
      (_, i) =>
        new ServerProcess({
          databaseUrl: backend?.target ?? '',
          dialect,
          instance: `i${i}`,
          mode: 'lease',
          leaseMs: 300,
          waitMs: 10_000,
          handlerDelayMs: 100,
        }),
    );
    for (const server of servers) await server.start();
    const entered = new Map<string, string[]>();
    for (const [i, server] of servers.entries()) {
      server.on('event', (e: ServerEvent) => {
        if (e.ev !== 'enter') return;
        const key = String(e.key);
        entered.set(key, [...(entered.get(key) ?? []), `i${i}${e.takeover ? '(takeover)' : ''}`]);
      });
    }
    const keys = Array.from({ length: KEYS }, () => randomUUID());
    await Promise.all(
      keys.flatMap((key, k) =>
        servers.map((server) =>
          callRaw({ port: server.port, path: 'payments.create', input: { ref: `r${k}`, amount: k + 1 }, key }),
        ),
      ),
    );
    const ranTwice = [...entered]
      .filter(([, runs]) => runs.length > 1)
      .map(([key, runs]) => `${key}: ${runs.join(' ')}`);
    const ledger = Number(
      (
        await backend.db
          .selectFrom('ledger')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirst()
      )?.n,
    );
    expect({ ranTwice, keysRun: entered.size, ledger }).toEqual({ ranTwice: [], keysRun: KEYS, ledger: KEYS });
  });
});
