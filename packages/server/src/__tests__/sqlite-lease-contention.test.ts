import { createSqliteFile } from '@trpc-idempotency/test-db';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { expectReason } from './expectations.js';
import { type AppDB, deferred, sleep, until } from './harness.js';

let keySeq = 0;
const newKey = () => `slc-${Date.now().toString(36)}-${++keySeq}`;

/**
 * Lease mode on SQLite files shared by several instances, each with its own connection (as far as SQLite's locks go,
 * each is another process): `wait` bounds a duplicate's claim, and write-lock contention never makes a live holder
 * give its key up after its handler ran.
 */
describe.each(['sqlite', 'libsql'] as const)('lease mode under write-lock contention on %s', (name) => {
  let file: Awaited<ReturnType<typeof createSqliteFile>>;
  const open = () => (name === 'sqlite' ? file.betterSqlite() : file.libsql()) as Kysely<AppDB>;
  beforeAll(async () => {
    file = await createSqliteFile();
    const db = open();
    await sql`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, amount INTEGER NOT NULL, note TEXT)`.execute(
      db,
    );
    await makeDialectApp({ db }).idempotency.migrate();
  });
  afterAll(() => file?.drop());

  it('a duplicate with wait 0 answers 409 while the holder still holds the write lock', async () => {
    const a = makeDialectApp({ db: open() }, { mode: 'lease', lease: 300 });
    const b = makeDialectApp({ db: open() }, { mode: 'lease', lease: 300, wait: 0 });
    const gate = deferred();
    a.control.gate = gate.promise;
    const key = newKey();
    const original = a.caller(key, 'wait0').payments.create({ amount: 1 });
    await until(() => a.control.atGate === 1);
    // A's handler transaction holds the write lock until the gate opens. A duplicate that honours wait 0 answers
    // before that; one that waits past its `wait` for the write lock gets it once A committed, and replays.
    const duplicate = b.caller(key, 'wait0').payments.create({ amount: 1 });
    const settled = duplicate.then(
      () => undefined,
      () => undefined,
    );
    await Promise.race([settled, sleep(900)]);
    gate.resolve();
    await expectReason(duplicate, 'in_progress', 'CONFLICT');
    await original;
    expect([a.control.runs, b.control.runs]).toEqual([1, 0]);
  });

  it('runs each key once when four instances send the same keys at once (lease 300 ms, handler 100 ms)', async () => {
    const apps = Array.from({ length: 4 }, () =>
      makeDialectApp({ db: open() }, { mode: 'lease', lease: 300, wait: 20_000 }),
    );
    for (const app of apps) app.control.delayMs = 100;
    const keys = Array.from({ length: 20 }, () => newKey());
    await Promise.allSettled(
      keys.flatMap((key) => apps.map((app) => app.caller(key, 'storm').payments.create({ amount: 1 }))),
    );
    const runs = apps.reduce((sum, app) => sum + app.control.runs, 0);
    const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM payments WHERE user_id = ${'storm'}`.execute(
      open(),
    );
    // The handler (an outside effect) runs once per key. (Not checked: that every copy gets its outcome. A claim
    // whose lease lapsed while its instance's other handlers held the write lock, before its own handler's
    // transaction began, can be taken over; its caller then answers 409 in_progress though `wait` is not used up.
    // The handler never ran there, so it still runs once; see docs/reliability.md.)
    expect({ runs, payments: Number(rows[0]?.n) }).toEqual({ runs: keys.length, payments: keys.length });
  });
});
