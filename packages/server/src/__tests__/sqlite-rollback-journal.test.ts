import { createSqliteFile } from '@trpc-idempotency/test-db';
import Database from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { type AppDB, deferred, sleep, until } from './harness.js';

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
    // createSqliteFile makes a WAL file; a file in WAL mode stays so until one connection alone switches it back.
    const setup = new Database(file.path);
    setup.pragma('journal_mode = DELETE');
    setup.close();
    const db = open();
    await sql`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, amount INTEGER NOT NULL, note TEXT)`.execute(
      db,
    );
    await makeDialectApp({ db }).idempotency.migrate();
  });
  afterAll(() => file?.drop());

  it('is in rollback-journal mode', async () => {
    const { rows } = await sql<{ journal_mode: string }>`PRAGMA journal_mode`.execute(open());
    expect(rows[0]?.journal_mode).toBe('delete');
  });

  /**
   * A reader on its own connection, through the app's driver: two SQLite libraries in one process (better-sqlite3's
   * and libSQL's) do not see each other's locks on a file, as two processes would.
   */
  const reader = () => {
    const db = open();
    return db.connection().execute(async (c) => {
      const q = (text: string) => sql.raw(text).execute(c);
      return {
        /** Opens a read transaction: SHARED held until `end`. */
        hold: async () => {
          await q('BEGIN');
          await q('SELECT count(*) FROM payments');
        },
        end: () => q('COMMIT'),
        /** Whether a writer holds PENDING or EXCLUSIVE: a new reader (busy_timeout 0) cannot take SHARED. */
        writerCommitting: async () => {
          await q('PRAGMA busy_timeout = 0');
          try {
            await q('SELECT count(*) FROM payments');
            return false;
          } catch (error) {
            if (String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY')) return true;
            throw error;
          }
        },
      };
    });
  };

  describe.each(['transaction', 'lease'] as const)('%s mode', (mode) => {
    it('commits the holder once a reader that held up its COMMIT lets go, and its duplicate on another instance replays it', async () => {
      const user = `reader-${mode}`;
      const a = makeDialectApp({ db: open() }, { mode, lease: 150, wait: 20_000 });
      const b = makeDialectApp({ db: open() }, { mode, lease: 150, wait: 20_000 });
      const gate = deferred();
      a.control.gate = gate.promise;
      const key = newKey();
      const original = a.caller(key, user).payments.create({ amount: 1 });
      const settled = original.then(
        (value) => ({ value }),
        (error) => ({ error }),
      );
      let done = false;
      void settled.then(() => {
        done = true;
      });
      await until(() => a.control.atGate === 1);
      // A reader (another connection, as a process reading the file would be) holds SHARED in an open read
      // transaction: the holder's COMMIT cannot take EXCLUSIVE until it ends.
      const held = await reader();
      const probe = await reader();
      await held.hold();
      // A duplicate on another instance waits for the holder (its `wait` is 20 s).
      const duplicate = b.caller(key, user).payments.create({ amount: 1 });
      duplicate.catch(() => {}); // Awaited below.
      gate.resolve();
      // The holder's COMMIT is under way (it holds PENDING, so no new reader gets in), or it gave up.
      while (!done && !(await probe.writerCommitting())) await sleep(5);
      await held.end();
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
