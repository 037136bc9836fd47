/**
 * SQLite's side of the key row, without the middleware: `npx tsx src/sqlite-shapes.ts`. Runs the statements ours
 * sends around the payment handler on better-sqlite3 (a WAL file, each statement prepared per call and awaited, as
 * Kysely's SqliteDriver does), in shapes interleaved over rounds, and prints the process CPU per call:
 * - `plain`: the handler in its own transaction (BEGIN, 3 statements, COMMIT);
 * - `now`: what ours sends (busy_timeout 0 and back around BEGIN IMMEDIATE and COMMIT, the claim's insert, a
 *   savepoint, the completion's update of the claimed row);
 * - `single`: one write of the key row: the claim only reads the key (BEGIN IMMEDIATE already holds the write lock,
 *   so no other writer can claim it meanwhile), and the completion inserts the row, done, with its result.
 * `ITEMIZE=1` adds `now` without the busy_timeout pairs and without the savepoint, to see where its cost goes.
 * Not a test: CPU only. CALLS per cell (default 2 000), ROUNDS (default 9).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

const CALLS = Number(process.env.CALLS ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const dir = mkdtempSync(join(tmpdir(), 'sqlite-shapes-'));
const db = new Database(join(dir, 's.db'));
db.pragma('journal_mode = WAL');
db.exec(`CREATE TABLE k (scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, path TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('in_progress', 'done')), token TEXT, locked_until INTEGER, response TEXT,
  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (scope, key));
CREATE INDEX k_expires ON k (expires_at);
CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
CREATE TABLE payments (id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, amount INTEGER NOT NULL, ref TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
INSERT INTO accounts SELECT i, 1000000000 FROM n;`);

const NOW = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";
const FP = 'a'.repeat(64);
const RESPONSE = '{"v":1,"ok":true,"data":{"account":1}}';

/** One statement as Kysely's driver runs it: prepared per call, rows read when it returns any, then awaited. */
async function q(text: string, params: unknown[] = []): Promise<{ rows: unknown[]; changes: number }> {
  const statement = db.prepare(text);
  if (statement.reader) return { rows: statement.all(...params), changes: 0 };
  return { rows: [], changes: statement.run(...params).changes };
}

async function handler(ref: string) {
  const account = 1 + Math.floor(Math.random() * 1000);
  await q('select "balance" from "accounts" where "id" = ?', [account]);
  await q('insert into "payments" ("account_id", "amount", "ref") values (?, ?, ?)', [account, 1, ref]);
  await q('update "accounts" set "balance" = "balance" - ? where "id" = ?', [1, account]);
}

async function withBusy0<T>(work: () => Promise<T>): Promise<T> {
  await q('PRAGMA busy_timeout = 0');
  try {
    return await work();
  } finally {
    await q('PRAGMA busy_timeout = 5000');
  }
}

const shapes: Record<string, (key: string) => Promise<void>> = {
  async plain(key) {
    await q('begin');
    await handler(key);
    await q('commit');
  },
  async now(key) {
    await withBusy0(() => q('BEGIN IMMEDIATE'));
    const claimed = await q(
      `INSERT INTO "k" (scope, key, fingerprint, path, status, created_at, expires_at)
VALUES (?, ?, ?, ?, 'in_progress', ${NOW}, ${NOW} + 86400000)
ON CONFLICT (scope, key) DO NOTHING RETURNING expires_at AS expires_ms`,
      ['bench', key, FP, 'payment'],
    );
    if (claimed.rows.length !== 1) throw new Error('not claimed');
    await q('SAVEPOINT s');
    await handler(key);
    await q('RELEASE SAVEPOINT s');
    const done = await q(
      `UPDATE "k" SET status = 'done', response = ?, locked_until = NULL,
  expires_at = CASE WHEN expires_at > ${NOW} THEN expires_at ELSE ${NOW} + 86400000 END
WHERE scope = ? AND key = ? AND status = 'in_progress' AND token IS NULL`,
      [RESPONSE, 'bench', key],
    );
    if (done.changes !== 1) throw new Error('claim lost');
    await withBusy0(() => q('COMMIT'));
  },
  async single(key) {
    await withBusy0(() => q('BEGIN IMMEDIATE'));
    const seen = await q(
      `SELECT t.status, t.fingerprint, t.path, t.response, max(0, t.expires_at - ${NOW}) AS expires_in_ms
FROM "k" AS t WHERE t.scope = ? AND t.key = ?`,
      ['bench', key],
    );
    if (seen.rows.length !== 0) throw new Error('seen');
    await q('SAVEPOINT s');
    await handler(key);
    await q('RELEASE SAVEPOINT s');
    const done = await q(
      `INSERT INTO "k" (scope, key, fingerprint, path, status, response, created_at, expires_at)
VALUES (?, ?, ?, ?, 'done', ?, ${NOW}, ${NOW} + 86400000) ON CONFLICT (scope, key) DO NOTHING`,
      ['bench', key, FP, 'payment', RESPONSE],
    );
    if (done.changes !== 1) throw new Error('claim lost');
    await withBusy0(() => q('COMMIT'));
  },
};

// Where `now`'s statements go, for scale (neither is a design ours can take: see bench/analysis.md).
const without = (pragmas: boolean, savepoint: boolean) => async (key: string) => {
  await (pragmas ? withBusy0(() => q('BEGIN IMMEDIATE')) : q('BEGIN IMMEDIATE'));
  await q(
    `INSERT INTO "k" (scope, key, fingerprint, path, status, created_at, expires_at)
VALUES (?, ?, ?, ?, 'in_progress', ${NOW}, ${NOW} + 86400000)
ON CONFLICT (scope, key) DO NOTHING RETURNING expires_at AS expires_ms`,
    ['bench', key, FP, 'payment'],
  );
  if (savepoint) await q('SAVEPOINT s');
  await handler(key);
  if (savepoint) await q('RELEASE SAVEPOINT s');
  await q(
    `UPDATE "k" SET status = 'done', response = ?, locked_until = NULL,
  expires_at = CASE WHEN expires_at > ${NOW} THEN expires_at ELSE ${NOW} + 86400000 END
WHERE scope = ? AND key = ? AND status = 'in_progress' AND token IS NULL`,
    [RESPONSE, 'bench', key],
  );
  await (pragmas ? withBusy0(() => q('COMMIT')) : q('COMMIT'));
};
if (process.env.ITEMIZE) Object.assign(shapes, { 'no-pragma': without(false, true), 'no-sp': without(true, false) });
const names = Object.keys(shapes);
const micros = new Map<string, number[]>(names.map((n) => [n, []]));
let seq = 0;
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < names.length; i++) {
    const name = names[(i + round) % names.length]!;
    const start = process.cpuUsage();
    for (let c = 0; c < CALLS; c++) await shapes[name]!(`k${seq++}`);
    const used = process.cpuUsage(start);
    micros.get(name)!.push((used.user + used.system) / CALLS);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ratio = (a: number[], b: number[]) => a.map((x, i) => x / b[i]!);
const fmt = (xs: number[]) => `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
console.log(`shape      CPU µs per call, median (min–max) of ${ROUNDS} rounds   ÷ plain's time (per round)   ÷ now's`);
for (const name of names) {
  const xs = micros.get(name)!;
  console.log(
    `${name.padEnd(10)} ${fmt(xs).padEnd(46)} ${fmt(ratio(xs, micros.get('plain')!)).padEnd(28)} ${fmt(ratio(xs, micros.get('now')!))}`,
  );
}
db.close();
rmSync(dir, { recursive: true, force: true });
