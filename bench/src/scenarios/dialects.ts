import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { initTRPC } from '@trpc/server';
import { type Kysely, sql } from 'kysely';
import type pg from 'pg';
import { rotate } from '../bench-env.ts';
import { median, type Spread, spread } from '../load/stats.ts';

export type DialectHandler = 'light' | 'payment';

/** One dialect, one handler: calls/s of the plain handler and of the same handler behind ours, per round. */
export interface DialectRow {
  dialect: string;
  handler: DialectHandler;
  calls: number;
  plainRates: number[];
  oursRates: number[];
  plain: number;
  ours: number;
  /** Per-round ours ÷ plain. */
  ratio: Spread;
}

interface DialectSetup {
  name: string;
  /** SQL flavour of the business tables (SQLite has no FOR UPDATE; MySQL no bigserial). */
  flavour: 'postgres' | 'mysql' | 'sqlite';
  open(): Promise<{ db: Kysely<any>; pool?: pg.Pool; close(): Promise<void> }>;
}

const ACCOUNTS = 1000;

async function createTables(db: Kysely<any>, flavour: DialectSetup['flavour']): Promise<void> {
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
const light = (db: Kysely<any>, ref: string | null) =>
  db.insertInto('d_payments').values({ account_id: 1, amount: 1, ref }).execute();

/** payment: lock an account (FOR UPDATE where the dialect has it), insert, debit; in one transaction. */
async function payment(db: Kysely<any>, flavour: DialectSetup['flavour'], ref: string | null) {
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
        light: t.procedure.mutation(() => light(db, null).then(() => 1)),
        payment: t.procedure.mutation(() => payment(db, setup.flavour, null)),
      });
      const guarded = t.router({
        light: t.procedure.use(idem.middleware).mutation(({ ctx }) => light(guardedDb(ctx), 'k').then(() => 1)),
        payment: t.procedure.use(idem.middleware).mutation(({ ctx }) => payment(guardedDb(ctx), setup.flavour, 'k')),
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
          calls: opts.calls,
          plainRates,
          oursRates,
          plain: median(plainRates),
          ours: median(oursRates),
          ratio: spread(oursRates.map((r, i) => r / plainRates[i]!)),
        };
        rows.push(row);
        opts.log(
          `  ${setup.name.padEnd(32)} ${handler.padEnd(7)} plain ${row.plain.toFixed(0).padStart(6)}/s ours ${row.ours.toFixed(0).padStart(6)}/s ratio ${row.ratio.median.toFixed(2)} (${row.ratio.min.toFixed(2)}–${row.ratio.max.toFixed(2)})`,
        );
      }
    } catch (error) {
      opts.log(`  ${setup.name}: failed (${(error as Error).message})`);
    } finally {
      await opened.close();
    }
  }
  return rows;
}

/**
 * The dialects the bench compares: Postgres on both of ours' paths (the bench database), MariaDB in a database
 * of its own (dropped after), SQLite and libSQL on WAL files in a temporary directory.
 */
export async function dialectSetups(databaseUrl: string): Promise<DialectSetup[]> {
  const { Kysely, PostgresDialect, SqliteDialect } = await import('kysely');
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
        return { db: maria.db, close: () => maria.drop() };
      },
    },
    {
      name: 'SQLite (better-sqlite3, WAL)',
      flavour: 'sqlite',
      open: async () => {
        const Database = (await import('better-sqlite3')).default;
        const file = new Database(join(dir, 'b.db'));
        file.pragma('journal_mode = WAL');
        const db = new Kysely<any>({ dialect: new SqliteDialect({ database: file }) });
        return { db, close: () => db.destroy() };
      },
    },
    {
      name: 'libSQL (local file, WAL)',
      flavour: 'sqlite',
      open: async () => {
        const { LibsqlDialect } = await import('@libsql/kysely-libsql');
        const db = new Kysely<any>({ dialect: new LibsqlDialect({ url: `file:${join(dir, 'l.db')}` }) });
        // The last dialect removes the temporary directory with its files.
        return {
          db,
          close: async () => {
            await db.destroy();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      },
    },
  ];
}
