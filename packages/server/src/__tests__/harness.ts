import { PGlite } from '@electric-sql/pglite';
import { initTRPC } from '@trpc/server';
import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { type Generated, Kysely, type Logger, PGliteDialect, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { z } from 'zod';
import {
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyOptions,
  idempotencyErrorFormatter,
} from '../index.js';

/** Every suite runs on these: the pg fast path (`pool`), the general path through Kysely, and PGlite. */
export const BACKENDS = ['pg-fast', 'pg-general', 'pglite'] as const;
export type BackendName = (typeof BACKENDS)[number];

export interface AppDB {
  payments: { id: Generated<number>; user_id: string; amount: number; note: string | null };
}

/** One database of a test file, on one backend. */
export interface Backend {
  name: BackendName;
  /** Connection string of the database (pg only). */
  url: string;
  db: Kysely<AppDB>;
  pool: pg.Pool | undefined;
  /**
   * Another "server instance" on the same database (pg only): its own Kysely and pool (`max` connections, 4). `log`:
   * its Kysely's (the fast path's own statements go through `pool`, not Kysely).
   */
  another(opts?: { max?: number; log?: Logger }): { db: Kysely<AppDB>; pool: pg.Pool | undefined };
  /** A new raw `pg` pool on this database (pg only; closed by `close()`). */
  newPool(): pg.Pool;
  /** Runs SQL for assertions, outside the middleware. */
  query<R = Record<string, unknown>>(text: string): Promise<R[]>;
  close(): Promise<void>;
}

/** Connections of each pg pool the tests open: small, as every helper's suites share one Postgres. */
export const PG_POOL_SIZE = 4;

export async function openBackend(name: BackendName): Promise<Backend> {
  if (name === 'pglite') {
    const db = new Kysely<AppDB>({ dialect: new PGliteDialect({ pglite: new PGlite() }) });
    await createAppTables(db);
    return {
      name,
      url: '',
      db,
      pool: undefined,
      another: () => {
        throw new Error('PGlite is one in-process database: no second instance');
      },
      newPool: () => {
        throw new Error('PGlite has no pg pool');
      },
      query: async (text) => (await sql.raw(text).execute(db)).rows as never,
      close: () => db.destroy(),
    };
  }
  const tdb: TestDatabase = await createTestDatabase(inject('pgAdminUrl'));
  // Small pools: every helper's suites share one Postgres (max_connections 100), and each test may open
  // "another instance".
  const make = (max = PG_POOL_SIZE, log?: Logger) => {
    const pool = new pg.Pool({ connectionString: tdb.url, max });
    pool.on('error', () => {});
    // A checked-out client whose backend is terminated (killLeaseHolders) reports it as an 'error' event: without a
    // listener Node would crash (pg-pool listens only to idle clients; on the Kysely path nobody else does).
    pool.on('connect', (client) => client.on('error', () => {}));
    const db = new Kysely<AppDB>({ log, dialect: new PostgresDialect({ pool }) });
    return { db, pool };
  };
  const main = make();
  const extra: Kysely<AppDB>[] = [main.db];
  const pools: pg.Pool[] = [];
  await createAppTables(main.db);
  return {
    name,
    url: tdb.url,
    db: main.db,
    pool: name === 'pg-fast' ? main.pool : undefined,
    another: (opts = {}) => {
      const other = make(opts.max, opts.log);
      extra.push(other.db);
      return { db: other.db, pool: name === 'pg-fast' ? other.pool : undefined };
    },
    newPool: () => {
      const pool = new pg.Pool({ connectionString: tdb.url, max: PG_POOL_SIZE });
      pool.on('error', () => {});
      pools.push(pool);
      return pool;
    },
    query: async (text) => (await tdb.pool.query(text)).rows,
    close: async () => {
      await Promise.allSettled(extra.map((k) => k.destroy()));
      await Promise.allSettled(pools.map((p) => p.end()));
      await tdb.drop();
    },
  };
}

async function createAppTables(db: Kysely<AppDB>) {
  await sql`CREATE TABLE payments (
    id serial PRIMARY KEY, user_id text NOT NULL, amount int NOT NULL, note text
  )`.execute(db);
}

/** The app's context in tests: who calls, and the request headers (as a createContext would pass them on). */
export interface Ctx {
  userId: string;
  headers: Record<string, string>;
}

export const t = initTRPC.context<Ctx>().create({ errorFormatter: idempotencyErrorFormatter });

/** Hooks a test sets to steer the handler: a gate to hold it, an error to throw. */
export interface Control {
  runs: number;
  /** `ctx.idempotency.takeover` of each run. */
  takeovers: boolean[];
  gate?: Promise<void>;
  /** Runs that finished their write and reached the gate: a test that kills a holder waits for this, not `runs`. */
  atGate?: number;
  /** Ms the handler spends after its write, outside the database. */
  delayMs?: number;
  throwAfterWrite?: () => Error;
  /** Runs inside the handler after its write, on its transaction (`makeDialectApp` only). */
  afterWrite?: (db: Kysely<AppDB>, key: string) => Promise<unknown>;
  result?: (input: { amount: number }) => unknown;
}

/** A router with one idempotent payment mutation that writes through ctx.idempotency.db, plus a second path. */
export function makeApp(
  backend: { db: Kysely<AppDB>; pool: pg.Pool | undefined },
  opts: Partial<IdempotencyOptions<Ctx, AppDB, boolean>> = {},
) {
  const events: IdempotencyEvent[] = [];
  const control: Control = { runs: 0, takeovers: [] };
  const idempotency = createIdempotency({
    db: backend.db,
    postgres: { pool: backend.pool },
    scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}`,
    onEvent: (e) => events.push(e),
    ...opts,
  } as IdempotencyOptions<Ctx, AppDB, true>);
  const procedure = t.procedure.use(idempotency.middleware);
  const pay = procedure.input(z.object({ amount: z.number().int() })).mutation(async ({ ctx, input }) => {
    control.runs++;
    control.takeovers.push(ctx.idempotency.takeover);
    const row = await ctx.idempotency.db
      .insertInto('payments')
      .values({ user_id: ctx.userId, amount: input.amount })
      .returning('id')
      .executeTakeFirstOrThrow();
    control.atGate = (control.atGate ?? 0) + 1;
    if (control.gate) await control.gate;
    if (control.delayMs) await new Promise((r) => setTimeout(r, control.delayMs));
    if (control.throwAfterWrite) throw control.throwAfterWrite();
    return control.result ? control.result(input) : { paymentId: row.id, amount: input.amount };
  });
  const router = t.router({
    payments: t.router({ create: pay, refund: pay }),
  });
  const caller = (key: string | undefined, userId = 'u1') =>
    router.createCaller({ userId, headers: key === undefined ? {} : { 'idempotency-key': key } });
  return { idempotency, router, caller, events, control };
}

/**
 * A lease holder "dies" (pg only): terminates every other session holding an advisory lock in this database, as a
 * crashed server's connections end. Its key's lock is free then, so its claim can be taken over once its lease ran out.
 */
export async function killLeaseHolders(backend: Pick<Backend, 'query'>): Promise<number> {
  const rows = await backend.query(`SELECT pg_terminate_backend(pid) FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
  return rows.length;
}

/** A promise with its resolver, to hold a handler mid-flight. */
export function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Resolves once `condition` holds (polled), so a test never races a loaded machine with a fixed sleep. */
export async function until(condition: () => boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await sleep(5);
  }
}
