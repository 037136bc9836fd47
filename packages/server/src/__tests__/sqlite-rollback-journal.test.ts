import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createSqliteFile } from '@trpc-idempotency/test-db';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { type AppDB, deferred, until } from './harness.js';

let keySeq = 0;
const newKey = () => `rj-${Date.now().toString(36)}-${++keySeq}`;

/**
 * SQLite in rollback-journal mode (`journal_mode=delete`, what a new file gets, and what libSQL's `file:` URL
 * leaves it in): a COMMIT needs the EXCLUSIVE lock, which waits for every other connection's SHARED lock, and a
 * reader cannot take SHARED while a writer holds PENDING. Instances with their own connections to one file (each
 * another process, as far as SQLite's locks go) send the same keys at once: a reader in the way must never make a
 * holder roll back a transaction whose handler ran, nor make a duplicate answer 409 before its `wait`.
 */
describe.each(['sqlite', 'libsql'] as const)('rollback journal on %s', (name) => {
  let file: Awaited<ReturnType<typeof createSqliteFile>>;
  const open = () => (name === 'sqlite' ? file.betterSqlite() : file.libsql()) as Kysely<AppDB>;
  beforeAll(async () => {
    file = await createSqliteFile();
    const db = open();
    // createSqliteFile makes a WAL file; a file in WAL mode stays so until one connection alone switches it back.
    await sql`PRAGMA journal_mode = DELETE`.execute(db);
    await sql`CREATE TABLE payments (
      id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, amount INTEGER NOT NULL, note TEXT
    )`.execute(db);
    await makeDialectApp({ db }).idempotency.migrate();
  });
  afterAll(() => file?.drop());

  it('is in rollback-journal mode', async () => {
    const { rows } = await sql<{ journal_mode: string }>`PRAGMA journal_mode`.execute(open());
    expect(rows[0]?.journal_mode).toBe('delete');
  });

  describe.each(['transaction', 'lease'] as const)('%s mode', (mode) => {
    // The duplicate is on another instance.
    it('commits the holder once a reader that held up its COMMIT lets go; a duplicate replays it', async () => {
      const user = `reader-${mode}`;
      const a = makeDialectApp({ db: open() }, { mode, lease: 150, wait: 20_000 });
      const b = makeDialectApp({ db: open() }, { mode, lease: 150, wait: 20_000 });
      const gate = deferred();
      a.control.gate = gate.promise;
      const key = newKey();
      const original = a.caller(key, user).payments.create({ amount: 1 });
      let done = false;
      const settled = original.then(
        (value) => ({ value }),
        (error) => ({ error }),
      );
      void settled.then(() => {
        done = true;
      });
      await until(() => a.control.atGate === 1);
      // A reader in another process holds SHARED in an open read transaction: the holder's COMMIT cannot take
      // EXCLUSIVE until it ends. (Another process, not another connection here: libSQL's COMMIT may wait inside
      // SQLite, which would hold up a reader on this event loop.)
      const held = await readerProcess(file.path);
      // A duplicate on another instance waits for the holder (its `wait` is 20 s).
      const duplicate = b.caller(key, user).payments.create({ amount: 1 });
      duplicate.catch(() => {}); // Awaited below.
      gate.resolve();
      // The reader lets go once the holder's COMMIT is under way (it holds PENDING, so no new reader gets in).
      held.letGoOnceWriterCommits();
      await until(() => done || held.released(), 20_000);
      const outcome = await settled;
      expect(
        'error' in outcome ? String((outcome.error as { cause?: unknown }).cause ?? outcome.error) : 'committed',
      ).toBe('committed');
      expect(await duplicate).toEqual((outcome as { value: unknown }).value);
      const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM payments WHERE user_id = ${user}`.execute(
        open(),
      );
      // The handler (an outside effect) ran once, and its write committed.
      expect({ runs: a.control.runs + b.control.runs, payments: Number(rows[0]?.n) }).toEqual({ runs: 1, payments: 1 });
    });
  });
});

/** Polls `FILE` with a read (busy_timeout 0) until a writer holds PENDING and refuses it, or 10 s pass. */
const PROBE = `import Database from 'better-sqlite3';
const probe = new Database(process.env.FILE, { timeout: 0 });
const end = Date.now() + 10000;
for (;;) {
  try { probe.prepare('SELECT count(*) FROM payments').get(); }
  catch (e) { if (String(e.code).startsWith('SQLITE_BUSY')) break; throw e; }
  if (Date.now() > end) break;
  await new Promise((r) => setTimeout(r, 5));
}`;

/**
 * In another process, a better-sqlite3 connection on `path` that opens a read transaction (SHARED held). Once told,
 * it ends it as soon as a writer holds PENDING (seen by PROBE in a third process: a second connection in the
 * reader's process would share its SHARED lock and never be refused), or after 10 s.
 */
async function readerProcess(path: string) {
  const reader = `import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
const reader = new Database(process.env.FILE, { timeout: 0 });
reader.exec('BEGIN');
reader.prepare('SELECT count(*) FROM payments').get();
console.log('held');
process.stdin.once('data', () => {
  spawn(process.execPath, ['--input-type=module', '-e', process.env.PROBE], { stdio: 'inherit' }).on('exit', () => {
    reader.exec('COMMIT');
    console.log('released');
    process.exit(0);
  });
});`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', reader], {
    env: { ...process.env, FILE: path, PROBE },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  await until(() => lines.includes('held'));
  return {
    letGoOnceWriterCommits: () => child.stdin.write('go\n'),
    released: () => lines.includes('released'),
  };
}
