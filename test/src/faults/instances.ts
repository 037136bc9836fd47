import { PGlite } from '@electric-sql/pglite';
import { Kysely, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { HistoryRecorder } from '../harness/history-recording.ts';
import { startPaymentsServer } from '../harness/in-process-server.ts';
import { createLedger, type PaymentsAppOptions } from '../harness/payments-app.ts';

/** The three ways the server reaches its database: the `pool` fast path, Kysely only, PGlite in process. */
export type ServerPath = 'pool' | 'kysely' | 'pglite';

export interface InstanceOptions extends Omit<PaymentsAppOptions, 'db' | 'pool' | 'onEnter' | 'onEvent' | 'instance'> {
  /** Instance name; executions are recorded under it. */
  name: string;
  path: ServerPath;
  /** Connection string (pg paths). */
  url?: string;
  /** The PGlite database (PGlite path): one in-process database, shared by nobody else. */
  pglite?: Kysely<any>;
  /** pg pool size. */
  poolMax?: number;
  recorder: HistoryRecorder;
}

/**
 * The payments server in the test process on one path, its handler starts and middleware events recorded: an
 * instance of several sharing one database, each with a pool of its own size.
 */
export async function startInstance(opts: InstanceOptions) {
  const { name, path, url, poolMax, recorder, pglite, ...app } = opts;
  let pool: pg.Pool | undefined;
  let db: Kysely<any>;
  if (path === 'pglite') {
    if (!pglite) throw new Error('startInstance: the PGlite path needs `pglite`');
    db = pglite;
  } else {
    pool = new pg.Pool({ connectionString: url, max: poolMax ?? 4, application_name: `faults-${name}` });
    pool.on('error', () => {});
    // The Kysely path's clients must not crash the process on a terminated backend (server README).
    if (path === 'kysely') pool.on('connect', (client) => client.on('error', () => {}));
    db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
  }
  const server = await startPaymentsServer({
    ...app,
    db,
    ...(path === 'pool' && pool ? { pool } : {}),
    instance: name,
    onEnter: (info) => recorder.enter(info, name),
    onEvent: (event) => recorder.middlewareEvent(event, name),
  });
  return {
    ...server,
    name,
    db,
    pool,
    /** Closes the HTTP server and, on pg, the pool (bounded: a leaked client would hold `end()` forever). */
    async close() {
      await server.close();
      if (pool) await Promise.race([pool.end(), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    },
  };
}

export type Instance = Awaited<ReturnType<typeof startInstance>>;

/** A fresh PGlite database with the ledger. */
export async function createPglite(): Promise<Kysely<any>> {
  const db = new Kysely<any>({ dialect: new PGliteDialect({ pglite: new PGlite() }) });
  await createLedger(db);
  return db;
}
