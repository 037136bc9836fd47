import { findPgBouncer, PGBOUNCER_MISSING, type PgBouncer, startPgBouncer } from '@trpc-idempotency/test-db';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type AppDB, type Backend, makeApp, openBackend } from './harness.js';

const pgbouncer = findPgBouncer();
if (!pgbouncer) console.warn(PGBOUNCER_MISSING);

/**
 * Behind a transaction pooler (PgBouncer 1.18, pool_mode = transaction, as Supabase, Neon and RDS Proxy put in
 * front of Postgres) each transaction of a client connection may run on another server connection, and a statement
 * one client prepared stays on the server connection it happened to get. So a client connection can miss the
 * prepared claim it prepared (26000), or find it prepared already by another client (42P05). Either must cost a
 * retry before anything ran, never an error or a second run.
 */
describe.skipIf(!pgbouncer).each(['pg-fast', 'pg-general'] as const)('%s behind PgBouncer', (name) => {
  let backend: Backend;
  let bouncer: PgBouncer;
  const opened: Kysely<AppDB>[] = [];
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
    bouncer = await startPgBouncer(inject('pgAdminUrl'), { poolSize: 2 });
  });
  afterAll(async () => {
    await Promise.allSettled(opened.map((db) => db.destroy()));
    await bouncer?.stop();
    await backend?.close();
  });

  /** A server instance starting: new client connections through the bouncer, more than it has server connections. */
  function instance() {
    const pool = new pg.Pool({ connectionString: bouncer.url(backend.url), max: 3 * bouncer.poolSize });
    pool.on('error', () => {});
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
    opened.push(db);
    return makeApp({ db, pool: name === 'pg-fast' ? pool : undefined }, { wait: 20_000 });
  }

  // The calls are concurrent.
  it('distinct and duplicate keys from instances sharing its server connections: no error, one run each', async () => {
    const KEYS = 12;
    const WAVES = 3;
    for (let wave = 0; wave < WAVES; wave++) {
      // Two instances start at once and send every key twice each. The second wave's new connections meet server
      // connections on which the first wave's prepared the claim.
      const apps = [instance(), instance()];
      for (const app of apps) app.control.delayMs = 5;
      const amounts = Array.from({ length: KEYS }, (_, k) => wave * KEYS + k + 1);
      const calls = amounts.flatMap((amount) =>
        apps.flatMap((app) => [0, 1].map(() => app.caller(`pool-${amount}`, 'pooled').payments.create({ amount }))),
      );
      const settled = await Promise.allSettled(calls);
      const errors = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
      expect(errors).toEqual([]);
      expect(apps.reduce((runs, app) => runs + app.control.runs, 0)).toBe(KEYS);
      const answers = settled.map((s) => JSON.stringify((s as PromiseFulfilledResult<unknown>).value));
      for (let k = 0; k < KEYS; k++) expect(new Set(answers.slice(k * 4, k * 4 + 4)).size).toBe(1);
    }
    const perKey = await backend.query<{ amount: number; n: string }>(
      `SELECT amount, count(*) AS n FROM payments WHERE user_id = 'pooled' GROUP BY amount HAVING count(*) <> 1`,
    );
    expect(perKey).toEqual([]);
    expect(await backend.query(`SELECT count(*)::int AS n FROM payments WHERE user_id = 'pooled'`)).toEqual([
      { n: KEYS * WAVES },
    ]);
  });

  it("claim and completion run prepared on a server connection that another client's instance prepared", async () => {
    /** An instance on one client connection, recording the texts it sends. */
    const oneClient = () => {
      const sent: string[] = [];
      const pool = new pg.Pool({ connectionString: bouncer.url(backend.url), max: 1 });
      pool.on('error', () => {});
      pool.on('connect', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown;
        client.query = ((...args: unknown[]) => {
          if (typeof args[0] === 'string') sent.push(args[0]);
          return query(...args);
        }) as never;
      });
      const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
      opened.push(db);
      const app = makeApp({ db, pool: name === 'pg-fast' ? pool : undefined }, { table: 'pooler_shared' });
      return { app, sent };
    };
    const c = oneClient();
    await c.app.idempotency.migrate();
    await c.app.caller('shared-1', 'shared').payments.create({ amount: 1 }); // prepared on the one server connection
    const holder = new pg.Client({ connectionString: bouncer.url(backend.url) });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      const held = await holder.query(`SELECT name FROM pg_prepared_statements WHERE statement LIKE '%pooler_shared%'`);
      expect(held.rows).toHaveLength(3); // the holder has that server connection
      // Another instance's new client gets the other server connection and prepares there.
      const d = oneClient();
      await d.app.caller('shared-2', 'shared').payments.create({ amount: 2 });
      expect(d.sent.filter((t) => t.startsWith('PREPARE'))).toHaveLength(1);
      // The first client, which prepared elsewhere, now runs there: the statements it finds are the same.
      c.sent.length = 0;
      expect(await c.app.caller('shared-3', 'shared').payments.create({ amount: 3 })).toMatchObject({ amount: 3 });
      const executes = c.sent.join('\n').match(/EXECUTE trpc_idempotency_(claim|complete)_/g);
      expect(executes).toEqual(['EXECUTE trpc_idempotency_claim_', 'EXECUTE trpc_idempotency_complete_']);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect(await backend.query(`SELECT amount FROM payments WHERE user_id = 'shared' ORDER BY amount`)).toEqual([
      { amount: 1 },
      { amount: 2 },
      { amount: 3 },
    ]);
  });

  it('a claim that reaches a server connection where its client never prepared it is retried, one run', async () => {
    // A table of its own: a statement name no server connection has yet.
    const pool = new pg.Pool({ connectionString: bouncer.url(backend.url), max: 1 });
    pool.on('error', () => {});
    const db = new Kysely<AppDB>({ dialect: new PostgresDialect({ pool }) });
    opened.push(db);
    const app = makeApp({ db, pool: name === 'pg-fast' ? pool : undefined }, { table: 'pooler_moved' });
    await app.idempotency.migrate();
    // Calls one after another use one server connection, the only one open: the claim is prepared there.
    await app.caller('moved-1', 'moved').payments.create({ amount: 1 });
    const holder = new pg.Client({ connectionString: bouncer.url(backend.url) });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      const held = await holder.query(`SELECT name FROM pg_prepared_statements WHERE statement LIKE '%pooler_moved%'`);
      expect(held.rows).toHaveLength(3); // the holder's transaction has that server connection
      // The app's client believes the claim prepared; the bouncer runs its next transaction on a new one.
      expect(await app.caller('moved-2', 'moved').payments.create({ amount: 2 })).toMatchObject({ amount: 2 });
      expect(await app.caller('moved-1', 'moved').payments.create({ amount: 1 })).toMatchObject({ amount: 1 });
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect(app.control.runs).toBe(2);
    expect(await backend.query(`SELECT amount FROM payments WHERE user_id = 'moved' ORDER BY amount`)).toEqual([
      { amount: 1 },
      { amount: 2 },
    ]);
  });
});
