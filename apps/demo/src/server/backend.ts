import { createIdempotency } from '@trpc-idempotency/server';
import type { DemoContext } from './context';
import { createDemoDatabase, type DemoDatabaseHandle } from './database';
import { migratePayments } from './schema';

/**
 * How long a duplicate waits for its in-flight original before the server answers 409 `in_progress`.
 * Shorter than the library's 5 s default so the flaky network's "in-flight duplicate" mode shows a real 409
 * within a second; `DEMO_WAIT_MS` overrides it.
 */
const WAIT_MS = Number(process.env.DEMO_WAIT_MS ?? 300);

function createBackend(handle: DemoDatabaseHandle) {
  const idempotency = createIdempotency({
    db: handle.db,
    pool: handle.pool,
    scope: ({ ctx }: { ctx: DemoContext }) => `user:${ctx.userId}`,
    wait: WAIT_MS,
  });
  let ready: Promise<void> | undefined;
  return {
    ...handle,
    idempotency,
    /** Applies both migrations once per process, on the first request (never during `next build`). */
    ensureReady(): Promise<void> {
      ready ??= (async () => {
        await idempotency.migrate();
        await migratePayments(handle.db);
      })().catch((error: unknown) => {
        ready = undefined; // let the next request try again, e.g. once Postgres is up
        throw error;
      });
      return ready;
    },
  };
}

export type DemoBackend = ReturnType<typeof createBackend>;

const holder = globalThis as typeof globalThis & { __trpcIdempotencyDemoBackend?: DemoBackend };

/**
 * One database handle per process, kept on `globalThis` because `next dev` re-evaluates modules on every edit:
 * a second PGlite instance on the same folder would corrupt it.
 */
export function getBackend(): DemoBackend {
  holder.__trpcIdempotencyDemoBackend ??= createBackend(createDemoDatabase());
  return holder.__trpcIdempotencyDemoBackend;
}
