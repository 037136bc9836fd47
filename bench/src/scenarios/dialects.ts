import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { initTRPC } from '@trpc/server';
import { type Kysely, sql } from 'kysely';
import type pg from 'pg';
import { rotate } from '../bench-env.ts';
import { runLoad } from '../load/http-load.ts';
import { median, type Spread, spread } from '../load/stats.ts';
import { spawnServer } from '../server/spawn-server.ts';

export type DialectHandler = 'light' | 'payment';

/** One dialect, one handler: calls/s of the plain handler and of the same handler behind ours, per round. */
export interface DialectRow {
  dialect: string;
  handler: DialectHandler;
  /** `in process`: createCaller, one call at a time; `HTTP`: child servers under the closed-loop load. */
  via?: 'in process' | 'HTTP';
  /** Calls per in-process cell; over HTTP, the load's connections. */
  calls: number;
  plainRates: number[];
  oursRates: number[];
  plain: number;
  ours: number;
  /** Per-round ours ÷ plain. */
  ratio: Spread;
  /** Over HTTP: responses other than 200 and client errors, both sides. */
  non200?: number;
}

/** SQL flavour of the business tables (SQLite has no FOR UPDATE; MySQL no bigserial). */
export type DialectFlavour = 'postgres' | 'mysql' | 'sqlite';

/** Where a child server opens the same database (sent to it as JSON). */
export type DialectRemote =
  | { kind: 'mysql'; url: string; flavour: 'mysql' }
  | { kind: 'sqlite'; file: string; flavour: 'sqlite' }
  | { kind: 'libsql'; url: string; flavour: 'sqlite' };

interface DialectSetup {
  name: string;
  flavour: DialectFlavour;
  /** `remote`: how a child server opens this database, for the HTTP cells (Postgres has the overhead scenario). */
  open(): Promise<{ db: Kysely<any>; pool?: pg.Pool; remote?: DialectRemote; close(): Promise<void> }>;
}

/** A Kysely on a dialect database, in this process or in a child server. */
export async function openDialectDb(remote: DialectRemote, max: number): Promise<Kysely<any>> {
  const { Kysely, MysqlDialect, SqliteDialect } = await import('kysely');
  switch (remote.kind) {
    case 'mysql': {
      const { createPool } = await import('mysql2');
      return new Kysely<any>({
        dialect: new MysqlDialect({ pool: createPool({ uri: remote.url, connectionLimit: max }) }),
      });
    }
    case 'sqlite': {
      const Database = (await import('better-sqlite3')).default;
      const file = new Database(remote.file);
      file.pragma('journal_mode = WAL');
      return new Kysely<any>({ dialect: new SqliteDialect({ database: file }) });
    }
    case 'libsql': {
      const { LibsqlDialect } = await import('@libsql/kysely-libsql');
      return new Kysely<any>({ dialect: new LibsqlDialect({ url: remote.url }) });
    }
  }
}

const ACCOUNTS = 1000;

async function createTables(db: Kysely<any>, flavour: DialectFlavour): Promise<void> {
  const id = {
    postgres: 'bigserial PRIMARY KEY',
    mysql: 'BIGINT AUTO_INCREMENT PRIMARY KEY',
    sqlite: 'INTEGER PRIMARY KEY',
  }[flavour];
  const text = flavour === 'mysql' ? 'VARCHAR(200)' : 'TEXT';
  await sql.raw(`CREATE TABLE IF NOT EXISTS d_accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)`).execute(db);
  await sql
    .raw(`CREATE TABLE IF NOT EXISTS d_payments (id ${id}, account_id INT NOT NULL, amount INT NOT NULL, ref ${text})`)
    .execute(db);
  const existing = await db
    .selectFrom('d_accounts')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirst();
  if (Number(existing?.n ?? 0) > 0) return;
  for (let start = 1; start <= ACCOUNTS; start += 250) {
    const values = Array.from({ length: 250 }, (_, i) => ({ id: start + i, balance: 1_000_000_000 }));
    await db.insertInto('d_accounts').values(values).execute();
  }
}

/** light: one autocommit insert (behind ours, it joins ours' transaction). */
export const dialectLight = (db: Kysely<any>, ref: string | null) =>
  db.insertInto('d_payments').values({ account_id: 1, amount: 1, ref }).execute();

/** payment: lock an account (FOR UPDATE where the dialect has it), insert, debit; in one transaction. */
export async function dialectPayment(db: Kysely<any>, flavour: DialectFlavour, ref: string | null) {
  const account = 1 + Math.floor(Math.random() * ACCOUNTS);
  const run = async (trx: Kysely<any>) => {
    let read = trx.selectFrom('d_accounts').select('balance').where('id', '=', account);
    if (flavour !== 'sqlite') read = read.forUpdate();
    await read.executeTakeFirstOrThrow();
    await trx.insertInto('d_payments').values({ account_id: account, amount: 1, ref }).execute();
    await trx
      .updateTable('d_accounts')
      .set((eb) => ({ balance: eb('balance', '-', 1) }))
      .where('id', '=', account)
      .execute();
    return { account };
  };
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}

/**
 * Overhead per dialect, in process (tRPC `createCaller`, no HTTP, one call at a time): the plain handler and
 * the same handler behind ours (transaction mode, a fresh key per call, writing through ctx.idempotency.db)
 * on the same database, interleaved by round; the ratio is taken per round, then the median and spread.
 */
export async function dialectsScenario(opts: {
  calls: number;
  rounds: number;
  setups: DialectSetup[];
  log: (line: string) => void;
  /** Also the HTTP cells, for the dialects a child server can open (not Postgres: see the overhead scenario). */
  http?: DialectHttpOptions;
}): Promise<DialectRow[]> {
  const { createIdempotency } = await import('@trpc-idempotency/server');
  const rows: DialectRow[] = [];
  for (const setup of opts.setups) {
    let opened: Awaited<ReturnType<DialectSetup['open']>>;
    try {
      opened = await setup.open();
    } catch (error) {
      opts.log(`  ${setup.name}: skipped (${(error as Error).message})`);
      continue;
    }
    const { db } = opened;
    try {
      await createTables(db, setup.flavour);
      const t = initTRPC.context<{ headers: Record<string, string> }>().create();
      const idem = createIdempotency({
        db,
        scope: () => 'bench',
        table: 'd_keys',
        ...(opened.pool ? { pool: opened.pool } : {}),
      });
      await idem.migrate();
      const guardedDb = (ctx: unknown) => (ctx as { idempotency: { db: Kysely<any> } }).idempotency.db;
      const plain = t.router({
        light: t.procedure.mutation(() => dialectLight(db, null).then(() => 1)),
        payment: t.procedure.mutation(() => dialectPayment(db, setup.flavour, null)),
      });
      const guarded = t.router({
        light: t.procedure.use(idem.middleware).mutation(({ ctx }) => dialectLight(guardedDb(ctx), 'k').then(() => 1)),
        payment: t.procedure
          .use(idem.middleware)
          .mutation(({ ctx }) => dialectPayment(guardedDb(ctx), setup.flavour, 'k')),
      });
      const tag = `${Date.now().toString(36)}-${process.pid}`;
      let seq = 0;
      const rate = async (side: 'plain' | 'ours', handler: DialectHandler, calls: number) => {
        const start = performance.now();
        for (let i = 0; i < calls; i++) {
          if (side === 'plain') await plain.createCaller({ headers: {} })[handler]();
          else await guarded.createCaller({ headers: { 'idempotency-key': `${tag}-${seq++}` } })[handler]();
        }
        return calls / ((performance.now() - start) / 1000);
      };
      // Warm-up: JIT, connections, statement caches.
      for (const handler of ['light', 'payment'] as const) {
        await rate('plain', handler, 50);
        await rate('ours', handler, 50);
      }
      const rates = new Map<string, number[]>();
      for (let round = 0; round < opts.rounds; round++) {
        for (const handler of ['light', 'payment'] as const) {
          for (const side of rotate(['plain', 'ours'] as const, round)) {
            const r = await rate(side, handler, opts.calls);
            rates.set(`${side}|${handler}`, [...(rates.get(`${side}|${handler}`) ?? []), r]);
          }
        }
      }
      for (const handler of ['light', 'payment'] as const) {
        const plainRates = rates.get(`plain|${handler}`) ?? [];
        const oursRates = rates.get(`ours|${handler}`) ?? [];
        const row: DialectRow = {
          dialect: setup.name,
          handler,
          via: 'in process',
          calls: opts.calls,
          plainRates,
          oursRates,
          plain: median(plainRates),
          ours: median(oursRates),
          ratio: spread(oursRates.map((r, i) => r / plainRates[i]!)),
        };
        rows.push(row);
        logRow(row, opts.log);
      }
      if (opts.http && opened.remote) rows.push(...(await httpCells(setup.name, opened.remote, opts.http, opts.log)));
    } catch (error) {
      opts.log(`  ${setup.name}: failed (${(error as Error).message})`);
    } finally {
      await opened.close();
    }
  }
  return rows;
}

function logRow(row: DialectRow, log: (line: string) => void): void {
  const name = `${row.dialect}${row.via === 'HTTP' ? ', HTTP' : ''}`;
  log(
    `  ${name.padEnd(38)} ${row.handler.padEnd(7)} plain ${row.plain.toFixed(0).padStart(6)}/s ours ${row.ours.toFixed(0).padStart(6)}/s ratio ${row.ratio.median.toFixed(2)} (${row.ratio.min.toFixed(2)}–${row.ratio.max.toFixed(2)})${row.non200 ? `, non-200 ${row.non200}` : ''}`,
  );
}

export interface DialectHttpOptions {
  /** The bench's Postgres and Redis (a child server opens its pg pool lazily: unused here). */
  databaseUrl: string;
  redisUrl: string;
  connections: number;
  durationMs: number;
  warmupMs: number;
  rounds: number;
}

/**
 * The same cells over HTTP: a plain and an ours child server (src/server/child.ts with `dialect`) on the
 * dialect's database, loaded like the Postgres overhead scenario (closed loop, fresh key per request), the
 * two sides alternating with the order rotated per round; ratio per round. The in-process cells stay the floor:
 * over HTTP, tRPC and HTTP dilute both sides, and concurrent requests meet the dialect's locking.
 */
async function httpCells(
  dialect: string,
  remote: DialectRemote,
  http: DialectHttpOptions,
  log: (line: string) => void,
): Promise<DialectRow[]> {
  const sides = ['plain', 'ours'] as const;
  const servers = new Map<string, Awaited<ReturnType<typeof spawnServer>>>();
  const rows: DialectRow[] = [];
  try {
    for (const side of sides) {
      const spec =
        side === 'plain'
          ? { name: 'plain', kind: 'plain' as const }
          : { name: 'ours-tx', kind: 'ours' as const, mode: 'transaction' as const, table: 'd_keys' };
      const config = { spec, databaseUrl: http.databaseUrl, redisUrl: http.redisUrl, poolMax: 8, dialect: remote };
      servers.set(side, await spawnServer(config));
    }
    const tag = `${Date.now().toString(36)}h`;
    let seq = 0;
    const rates = new Map<string, number[]>();
    const non200 = new Map<string, number>();
    for (let round = 0; round < http.rounds; round++) {
      for (const handler of ['light', 'payment'] as const) {
        for (const side of rotate([...sides], round)) {
          const prefix = `${tag}-${seq++}-`;
          const result = await runLoad({
            url: servers.get(side)!.url,
            path: handler,
            connections: http.connections,
            durationMs: http.durationMs,
            warmupMs: http.warmupMs,
            key: (i) => `${prefix}${i}`,
          });
          const id = `${side}|${handler}`;
          rates.set(id, [...(rates.get(id) ?? []), result.rps]);
          const failed = result.requests - (result.statuses['200'] ?? 0) + result.errors;
          non200.set(handler, (non200.get(handler) ?? 0) + failed);
        }
      }
    }
    for (const handler of ['light', 'payment'] as const) {
      const plainRates = rates.get(`plain|${handler}`) ?? [];
      const oursRates = rates.get(`ours|${handler}`) ?? [];
      const row: DialectRow = {
        dialect,
        handler,
        via: 'HTTP',
        calls: http.connections,
        plainRates,
        oursRates,
        plain: median(plainRates),
        ours: median(oursRates),
        ratio: spread(oursRates.map((r, i) => r / plainRates[i]!)),
        non200: non200.get(handler) ?? 0,
      };
      rows.push(row);
      logRow(row, log);
    }
  } finally {
    await Promise.all([...servers.values()].map((s) => s.stop()));
  }
  return rows;
}

/**
 * The dialects the bench compares: Postgres on both of ours' paths (the bench database), MariaDB in a database
 * of its own (dropped after), SQLite and libSQL on WAL files in a temporary directory.
 */
export async function dialectSetups(databaseUrl: string): Promise<DialectSetup[]> {
  const { Kysely, PostgresDialect } = await import('kysely');
  const pgModule = (await import('pg')).default;
  const dir = mkdtempSync(join(tmpdir(), `bench-dialects-${process.pid}-`));
  const postgres = (withPool: boolean): DialectSetup => ({
    name: withPool ? 'Postgres (pg, `pool` fast path)' : 'Postgres (pg, general path)',
    flavour: 'postgres',
    open: async () => {
      const pool = new pgModule.Pool({ connectionString: databaseUrl, max: 2 });
      const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
      return { db, ...(withPool ? { pool } : {}), close: () => db.destroy() };
    },
  });
  return [
    postgres(true),
    postgres(false),
    {
      name: 'MariaDB 10.11 (mysql2)',
      flavour: 'mysql',
      open: async () => {
        const { createMariaDbDatabase } = await import('@trpc-idempotency/test-db');
        const maria = await createMariaDbDatabase({ max: 2 });
        return { db: maria.db, remote: { kind: 'mysql', url: maria.url, flavour: 'mysql' }, close: () => maria.drop() };
      },
    },
    {
      name: 'SQLite (better-sqlite3, WAL)',
      flavour: 'sqlite',
      open: async () => {
        const remote = { kind: 'sqlite', file: join(dir, 'b.db'), flavour: 'sqlite' } as const;
        const db = await openDialectDb(remote, 1);
        return { db, remote, close: () => db.destroy() };
      },
    },
    {
      name: 'libSQL (local file, WAL)',
      flavour: 'sqlite',
      open: async () => {
        const remote = { kind: 'libsql', url: `file:${join(dir, 'l.db')}`, flavour: 'sqlite' } as const;
        const db = await openDialectDb(remote, 1);
        // The last dialect removes the temporary directory with its files.
        return {
          db,
          remote,
          close: async () => {
            await db.destroy();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      },
    },
  ];
}
