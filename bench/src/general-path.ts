/**
 * The general Kysely path (no `pool`) against the pg fast path and against the same handler without idempotency,
 * per dialect, in process (no HTTP): issue 15 goal 4. Handlers are the main bench's light and payment
 * (server/handlers.ts); ours runs them through ctx.idempotency.db, plain through the app's Kysely. Each call is a
 * first execution (fresh key). Contenders run interleaved, rotated each round; ratios are medians of per-round
 * ratios with their min–max. A counting pass after the timing prints statements (SQL texts sent) per call.
 *
 *   npx tsx src/general-path.ts            (CALLS=400 ROUNDS=5 CONC=1 ONLY=pg,mariadb,sqlite)
 *
 * BEFORE=<dir of another build of the server package's dist> adds that build's general path as `before`, for
 * before/after figures of a change in one interleaved run.
 *
 * Postgres at DATABASE_URL (database gp_bench is created), MariaDB at MYSQL_URL (database gp_bench), SQLite on a
 * temporary WAL file (better-sqlite3, its defaults otherwise).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { initTRPC } from '@trpc/server';
import { createIdempotency } from '@trpc-idempotency/server';
import Database from 'better-sqlite3';
import type { Transaction } from 'kysely';
import { type Dialect, Kysely, type LogEvent, MysqlDialect, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { type BenchDB, lightHandler, type PaymentInput, paymentHandler } from './server/handlers.ts';

const CALLS = Number(process.env.CALLS ?? 400);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const CONC = Number(process.env.CONC ?? 1);
const ONLY = (process.env.ONLY ?? 'pg,mariadb,sqlite').split(',');
const ACCOUNTS = 1000;
const PG_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const DB_NAME = 'gp_bench';
type CreateIdempotency = typeof createIdempotency;
const before: CreateIdempotency | undefined = process.env.BEFORE
  ? ((await import(`${process.env.BEFORE}/index.js`)) as { createIdempotency: CreateIdempotency }).createIdempotency
  : undefined;

/** Statements sent, counted while `counting` (Kysely's log sees every query of a Kysely connection; pg is patched). */
let counting = false;
let statements = 0;
const log = (event: LogEvent) => {
  if (counting && event.level === 'query') statements++;
};
const pgQuery = pg.Client.prototype.query;
let pgTexts = 0;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (counting) pgTexts++;
  return (pgQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof pgQuery;

type Handler = 'light' | 'payment';
type Call = (i: number) => Promise<unknown>;
interface Contender {
  name: string;
  call: Record<Handler, Call>;
}

const t = initTRPC.context<{ headers: Record<string, string> }>().create();
let seq = 0;

/**
 * MariaDB has no UPDATE … RETURNING and SQLite no SELECT … FOR UPDATE (a transaction holding the write lock is
 * alone anyway): there payment runs the same three statements without them (the balance is read by the lock).
 */
let payment = paymentHandler;
const portablePayment =
  (lock: boolean) => async (db: Kysely<BenchDB>, input: PaymentInput, ref: string | undefined) => {
    const run = async (trx: Kysely<BenchDB> | Transaction<BenchDB>) => {
      const read = trx.selectFrom('accounts').select('balance').where('id', '=', input.accountId);
      const { balance } = await (lock ? read.forUpdate() : read).executeTakeFirstOrThrow();
      const inserted = await trx
        .insertInto('payments')
        .values({ id: undefined, account_id: input.accountId, amount: input.amount, ref: ref ?? null })
        .executeTakeFirstOrThrow();
      await trx
        .updateTable('accounts')
        .set((eb) => ({ balance: eb('balance', '-', input.amount) }))
        .where('id', '=', input.accountId)
        .executeTakeFirstOrThrow();
      return { id: Number(inserted.insertId), balance: Number(balance) - input.amount };
    };
    return db.isTransaction ? run(db) : db.transaction().execute(run);
  };

function plainContender(name: string, db: Kysely<BenchDB>): Contender {
  const router = t.router({
    light: t.procedure.mutation(() => lightHandler(db, input(), undefined)),
    payment: t.procedure.mutation(() => payment(db, input(), undefined)),
  });
  const caller = router.createCaller({ headers: {} });
  return { name, call: { light: () => caller.light(), payment: () => caller.payment() } };
}

function oursContender(name: string, db: Kysely<BenchDB>, pool?: pg.Pool, build = createIdempotency): Contender {
  const idem = build({ db, scope: () => 'bench', table: 'gp_keys', ...(pool ? { pool } : {}) });
  const router = t.router({
    light: t.procedure
      .use(idem.middleware)
      .mutation(({ ctx }) => lightHandler(ctx.idempotency.db as Kysely<BenchDB>, input(), ctx.idempotency.key)),
    payment: t.procedure
      .use(idem.middleware)
      .mutation(({ ctx }) => payment(ctx.idempotency.db as Kysely<BenchDB>, input(), ctx.idempotency.key)),
  });
  const call =
    (h: Handler): Call =>
    () =>
      router.createCaller({ headers: { 'idempotency-key': `${process.pid}-${Date.now()}-${++seq}` } })[h]();
  return { name, call: { light: call('light'), payment: call('payment') } };
}

function input(): PaymentInput {
  return { accountId: 1 + Math.floor(Math.random() * ACCOUNTS), amount: 1 };
}

/** Client CPU µs per call of each contender's rounds (all of it on SQLite, in process; less noisy than time). */
const cpu = new Map<Call, number[]>();

async function rate(call: Call): Promise<number> {
  let next = 0;
  const used = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONC }, async () => {
      while (next < CALLS) await call(next++);
    }),
  );
  const elapsed = performance.now() - start;
  const { user, system } = process.cpuUsage(used);
  cpu.set(call, [...(cpu.get(call) ?? []), (user + system) / CALLS]);
  return CALLS / (elapsed / 1000);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const spread = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;

/** Times the contenders interleaved; prints calls/s and the ratios `pairs` asks for (numerator / denominator). */
async function compare(title: string, contenders: Contender[], pairs: [string, string][]): Promise<void> {
  for (const handler of ['light', 'payment'] as Handler[]) {
    const rates = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
    for (const c of contenders) await rate(c.call[handler]); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!);
      for (const c of order) rates.get(c.name)!.push(await rate(c.call[handler]));
    }
    const counts: string[] = [];
    for (const c of contenders) {
      statements = 0;
      pgTexts = 0;
      counting = true;
      for (let i = 0; i < 20; i++) await c.call[handler](i);
      counting = false;
      counts.push(
        `${c.name} ${(statements / 20).toFixed(1)} stmts${pgTexts ? `, ${(pgTexts / 20).toFixed(1)} pg texts` : ''}`,
      );
    }
    console.log(`\n${title} — ${handler} (${CALLS} calls × ${ROUNDS} rounds, concurrency ${CONC})`);
    for (const c of contenders) {
      const us = cpu.get(c.call[handler])!.slice(1); // without the warm-up round
      console.log(
        `  ${c.name}: ${median(rates.get(c.name)!).toFixed(0)} calls/s, ${median(us).toFixed(0)} µs client CPU/call`,
      );
    }
    for (const [a, b] of pairs) {
      const ra = rates.get(a)!;
      const rb = rates.get(b)!;
      const ratios = ra.map((x, i) => x / rb[i]!);
      console.log(`  ${a} / ${b}: ${median(ratios).toFixed(2)}× (${spread(ratios)})`);
    }
    console.log(`  per call: ${counts.join('; ')}`);
  }
}

async function setupSchema(db: Kysely<any>, dialect: 'pg' | 'mysql' | 'sqlite'): Promise<void> {
  const id =
    dialect === 'pg'
      ? 'bigserial PRIMARY KEY'
      : dialect === 'mysql'
        ? 'BIGINT AUTO_INCREMENT PRIMARY KEY'
        : 'INTEGER PRIMARY KEY AUTOINCREMENT';
  await sql.raw(`DROP TABLE IF EXISTS payments`).execute(db);
  await sql.raw(`DROP TABLE IF EXISTS accounts`).execute(db);
  await sql.raw(`DROP TABLE IF EXISTS gp_keys`).execute(db);
  await sql.raw(`CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)`).execute(db);
  await sql
    .raw(`CREATE TABLE payments (id ${id}, account_id int NOT NULL, amount int NOT NULL, ref varchar(300))`)
    .execute(db);
  for (let from = 1; from <= ACCOUNTS; from += 500) {
    const values = Array.from({ length: 500 }, (_, i) => `(${from + i}, 1000000000)`).join(', ');
    await sql.raw(`INSERT INTO accounts (id, balance) VALUES ${values}`).execute(db);
  }
}

async function onPostgres(): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  if ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME])).rowCount === 0) {
    await admin.query(`CREATE DATABASE ${DB_NAME}`);
  }
  await admin.end();
  const url = new URL(PG_URL);
  url.pathname = `/${DB_NAME}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: Math.max(2, CONC + 1) });
  const db = new Kysely<BenchDB>({ dialect: new PostgresDialect({ pool }), log });
  await setupSchema(db, 'pg');
  await createIdempotency({ db, scope: () => 'bench', table: 'gp_keys' }).migrate();
  await compare(
    'Postgres',
    [
      plainContender('plain', db),
      oursContender('ours-fast', db, pool),
      oursContender('ours-general', db),
      ...(before ? [oursContender('before-general', db, undefined, before)] : []),
    ],
    [
      ['ours-general', 'ours-fast'],
      ['ours-fast', 'plain'],
      ['ours-general', 'plain'],
      ...(before
        ? ([
            ['before-general', 'ours-fast'],
            ['ours-general', 'before-general'],
          ] as [string, string][])
        : []),
    ],
  );
  await db.destroy();
}

async function onMariadb(): Promise<void> {
  const boot = createPool({ uri: MYSQL_URL });
  await boot.promise().query(`CREATE DATABASE IF NOT EXISTS ${DB_NAME}`);
  await boot.promise().end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${DB_NAME}`;
  payment = portablePayment(true);
  await onDialect(
    'MariaDB (mysql2)',
    new MysqlDialect({ pool: createPool({ uri: url.toString(), connectionLimit: Math.max(2, CONC + 1) }) }),
    'mysql',
  );
}

async function onSqlite(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-general-path-'));
  const file = new Database(join(dir, 'b.db'));
  file.pragma('journal_mode = WAL');
  payment = portablePayment(false);
  try {
    await onDialect('SQLite (better-sqlite3, WAL)', new SqliteDialect({ database: file }), 'sqlite');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function onDialect(title: string, dialect: Dialect, kind: 'mysql' | 'sqlite'): Promise<void> {
  const db = new Kysely<BenchDB>({ dialect, log });
  await setupSchema(db, kind);
  await createIdempotency({ db, scope: () => 'bench', table: 'gp_keys' }).migrate();
  await compare(
    title,
    [
      plainContender('plain', db),
      oursContender('ours', db),
      ...(before ? [oursContender('before', db, undefined, before)] : []),
    ],
    [
      ['ours', 'plain'],
      ...(before
        ? ([
            ['before', 'plain'],
            ['ours', 'before'],
          ] as [string, string][])
        : []),
    ],
  );
  await db.destroy();
}

console.log(
  `load before: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
if (ONLY.includes('pg')) await onPostgres();
if (ONLY.includes('mariadb')) await onMariadb();
if (ONLY.includes('sqlite')) await onSqlite();
console.log(
  `\nload after: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
