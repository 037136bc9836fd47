import { createSqliteFile } from '@trpc-idempotency/test-db';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { type AppDB, t } from './harness.js';

let keySeq = 0;
const newKey = () => `bt-${Date.now().toString(36)}-${++keySeq}`;

/**
 * Both SQLite drivers are synchronous: BEGIN IMMEDIATE must run with busy_timeout 0 (tried again from JavaScript),
 * while the handler's queries, and the app's after the call, run with the app's own busy_timeout. libSQL's COMMIT
 * waits inside SQLite (busy_timeout at least 10 s around it), better-sqlite3's with 0 (tried again from JavaScript).
 * Replays the Kysely log of a first execution to know what busy_timeout each of our statements ran with.
 */
describe.each(['sqlite', 'libsql'] as const)('busy_timeout on %s', (name) => {
  let file: Awaited<ReturnType<typeof createSqliteFile>>;
  const logged: string[] = [];
  const open = () => {
    const opts = {
      log: (event: { level: string; query: { sql: string } }) => {
        if (event.level === 'query') logged.push(event.query.sql);
      },
    };
    return (name === 'sqlite' ? file.betterSqlite(opts) : file.libsql(opts)) as Kysely<AppDB>;
  };
  beforeAll(async () => {
    file = await createSqliteFile();
    const db = open();
    await createIdempotency({ db, scope: () => 'u' }).migrate();
  });
  afterAll(() => file?.drop());

  it.each([0, 1234])('BEGIN IMMEDIATE with 0, the handler and the app with theirs (%i)', async (appMs) => {
    const db = open();
    await sql.raw(`PRAGMA busy_timeout = ${appMs}`).execute(db);
    const idempotency = createIdempotency({ db, scope: () => 'u' });
    const router = t.router({
      run: t.procedure.use(idempotency.middleware).mutation(async ({ ctx }) => {
        const { rows } = await sql.raw('PRAGMA busy_timeout').execute(ctx.idempotency.db);
        return Number(Object.values(rows[0] as object)[0]);
      }),
    });
    logged.length = 0;
    const seen = await router.createCaller({ userId: 'u1', headers: { 'idempotency-key': newKey() } }).run();
    expect(seen).toBe(appMs);

    let current = appMs;
    const at: Record<string, number> = {};
    let sets = 0;
    for (const text of logged) {
      const set = /^PRAGMA busy_timeout = (\d+)$/.exec(text);
      if (set) {
        current = Number(set[1]);
        sets++;
      }
      if (text === 'BEGIN IMMEDIATE' || text === 'COMMIT') at[text] = current;
    }
    expect(at['BEGIN IMMEDIATE']).toBe(0);
    if (name === 'sqlite') expect(at.COMMIT).toBe(0);
    else expect(at.COMMIT).toBeGreaterThanOrEqual(10_000);
    expect(current).toBe(appMs);
    // Set and put back around BEGIN IMMEDIATE and around COMMIT, even where the app's value is ours already: the app
    // may change its busy_timeout at any time, and a BEGIN IMMEDIATE run with a raised one would wait inside SQLite,
    // blocking the event loop past `wait` (skipping the pair, 2 of libSQL's statements, was measured and rejected).
    expect(sets).toBe(4);
    const after = await sql.raw('PRAGMA busy_timeout').execute(db);
    expect(Number(Object.values(after.rows[0] as object)[0])).toBe(appMs);
  });
});
