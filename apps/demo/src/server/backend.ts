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

interface SharedDatabase {
  handle: DemoDatabaseHandle;
  ready?: Promise<void>;
}

const holder = globalThis as typeof globalThis & { __trpcIdempotencyDemoDatabase?: SharedDatabase };

/**
 * One database per process, kept on `globalThis`: `next dev` re-evaluates modules on every edit, and the
 * instrumentation hook is bundled apart from the route. A second PGlite on the same folder would corrupt it.
 * Only the database is shared: each bundle keeps its own middleware, so the errors it throws are the ones its
 * own `idempotencyErrorFormatter` recognises.
 */
holder.__trpcIdempotencyDemoDatabase ??= { handle: createDemoDatabase() };
const shared: SharedDatabase = holder.__trpcIdempotencyDemoDatabase;

export const database = shared.handle;

export const idempotency = createIdempotency({
  db: database.db,
  postgres: { pool: database.pool },
  scope: ({ ctx }: { ctx: DemoContext }) => `user:${ctx.userId}`,
  wait: WAIT_MS,
});

/** Applies both migrations once per process, on start or on the first request (never during `next build`). */
export function ensureReady(): Promise<void> {
  shared.ready ??= (async () => {
    await idempotency.migrate();
    await migratePayments(database.db);
  })().catch((error: unknown) => {
    shared.ready = undefined; // let the next request try again, e.g. once Postgres is up
    throw error;
  });
  return shared.ready;
}
