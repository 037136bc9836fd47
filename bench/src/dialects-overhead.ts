/**
 * Overhead per dialect, in process (no HTTP): sequential first executions of a handler that inserts one row,
 * plain (in its own Kysely transaction) and behind the idempotency middleware (transaction mode, a fresh key per
 * call, writing through ctx.idempotency.db), on the same database. Prints calls/s of each and their ratio.
 * `npm run bench:dialects -w @trpc-idempotency/bench` with MariaDB at MYSQL_URL; SQLite on a temporary WAL file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { LibsqlDialect } from '@libsql/kysely-libsql';
import { initTRPC } from '@trpc/server';
import { createIdempotency } from '@trpc-idempotency/server';
import Database from 'better-sqlite3';
import { type Dialect, Kysely, MysqlDialect, SqliteDialect, sql } from 'kysely';
import { createPool } from 'mysql2';

const CALLS = Number(process.env.CALLS ?? 1000);
const ROUNDS = 3;
const dir = mkdtempSync(join(tmpdir(), 'bench-dialects-'));

const dialects: [string, () => Dialect, string][] = [
  [
    'MariaDB 10.11 (mysql2)',
    () => new MysqlDialect({ pool: createPool({ uri: process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test' }) }),
    'CREATE TABLE IF NOT EXISTS bench_rows (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)',
  ],
  [
    'SQLite (better-sqlite3, WAL)',
    () => {
      const db = new Database(join(dir, 'b.db'));
      db.pragma('journal_mode = WAL');
      return new SqliteDialect({ database: db });
    },
    'CREATE TABLE IF NOT EXISTS bench_rows (id INTEGER PRIMARY KEY AUTOINCREMENT, v INTEGER NOT NULL)',
  ],
  [
    'libSQL (local file, WAL)',
    () => new LibsqlDialect({ url: `file:${join(dir, 'l.db')}` }),
    'CREATE TABLE IF NOT EXISTS bench_rows (id INTEGER PRIMARY KEY AUTOINCREMENT, v INTEGER NOT NULL)',
  ],
];

async function rate(run: (i: number) => Promise<unknown>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < CALLS; i++) await run(i);
  return CALLS / ((performance.now() - start) / 1000);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

console.log(`| dialect | plain calls/s | idempotent calls/s | ratio | (${CALLS} calls × ${ROUNDS} rounds, median) |`);
console.log('|---|---|---|---|---|');
for (const [name, make, ddl] of dialects) {
  const db = new Kysely<any>({ dialect: make() });
  if (name.startsWith('MariaDB')) await sql`DROP TABLE IF EXISTS bench_rows, bench_keys`.execute(db);
  await sql.raw(ddl).execute(db);
  const t = initTRPC.context<{ headers: Record<string, string> }>().create();
  const idem = createIdempotency({ db, scope: () => 'bench', table: 'bench_keys' });
  await idem.migrate();
  const plain = t.router({
    m: t.procedure.mutation(() =>
      db.transaction().execute((trx) => trx.insertInto('bench_rows').values({ v: 1 }).execute()),
    ),
  });
  const guarded = t.router({
    m: t.procedure.use(idem.middleware).mutation(({ ctx }) =>
      ctx.idempotency.db
        .insertInto('bench_rows')
        .values({ v: 2 })
        .execute()
        .then(() => 1),
    ),
  });
  const plains: number[] = [];
  const guardeds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    plains.push(await rate(() => plain.createCaller({ headers: {} }).m()));
    guardeds.push(
      await rate((i) => guarded.createCaller({ headers: { 'idempotency-key': `k-${round}-${i}-${Date.now()}` } }).m()),
    );
  }
  const p = median(plains);
  const g = median(guardeds);
  console.log(`| ${name} | ${p.toFixed(0)} | ${g.toFixed(0)} | ${(g / p).toFixed(2)}× | |`);
  if (name.startsWith('MariaDB')) await sql`DROP TABLE IF EXISTS bench_rows, bench_keys`.execute(db);
  await db.destroy();
}
console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
rmSync(dir, { recursive: true, force: true });
