import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { keyRow, paymentsOf } from './dialect-rows.js';
import { failure } from './expectations.js';

let keySeq = 0;
const newKey = () => `hs-${Date.now().toString(36)}-${++keySeq}`;

/**
 * Raw SQL through ctx.idempotency.db: the app's own code, trusted (docs/reliability.md "Trust boundary"). What costs
 * nothing is checked: a statement that starts with a transaction keyword is refused before it runs. One that ends
 * the call's transaction anyway (a comment before the keyword, a procedure, DDL that commits implicitly) fails the
 * call loudly, naming the cause, and its key never runs again. Session state the handler leaves on a pooled
 * connection does not reach the next calls' transactions: ours set what they need.
 */
describe.each(DIALECT_BACKENDS)('raw SQL on ctx.idempotency.db on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  const pg = name === 'pg-fast' || name === 'pg-general' || name === 'pglite';
  const sqlite = name === 'sqlite' || name === 'libsql';
  const payments = async (userId: string) => (await paymentsOf(backend, userId)).length;

  it('refuses a statement that starts with a transaction keyword before it runs, and commits nothing', async () => {
    const app = makeDialectApp(backend);
    const texts = ['COMMIT', 'commit work', ' END', 'ROLLBACK', 'BEGIN', 'START TRANSACTION', '\n\tcommit'];
    if (pg) texts.push('ABORT', "PREPARE TRANSACTION 'x'");
    if (name === 'mariadb') texts.push('SET autocommit = 1', 'USE mysql', 'XA START 1');
    const seen: [string, string, number, unknown][] = [];
    for (const [i, text] of texts.entries()) {
      const key = newKey();
      app.control.afterWrite = (db) => sql.raw(text).execute(db);
      const error = await failure(app.caller(key, `plain-${i}`).payments.create({ amount: 1 }));
      seen.push([text, error.message, await payments(`plain-${i}`), await keyRow(backend, key)]);
      await expect.poll(() => backend.idleInTransaction()).toBe(0);
    }
    const refused = [expect.stringMatching(/cannot end the call's transaction/), 0, undefined];
    expect(seen).toEqual(texts.map((text) => [text, ...refused]));
    // The handler's own savepoints are its business, and a text that only mentions a keyword runs.
    const key = newKey();
    app.control.afterWrite = async (db) => {
      await sql`SAVEPOINT mine`.execute(db);
      await sql`ROLLBACK TO SAVEPOINT mine`.execute(db);
      await sql`RELEASE SAVEPOINT mine`.execute(db);
      await sql`SELECT 'COMMIT; END' AS ${sql.ref('end')}`.execute(db);
    };
    await app.caller(key, 'plain-ok').payments.create({ amount: 1 });
    expect(await payments('plain-ok')).toBe(1);
    expect((await keyRow(backend, key))?.status).toBe('done');
  });

  it('fails naming the cause when the handler ends the transaction anyway, and never runs the key twice', async () => {
    const app = makeDialectApp(backend);
    // What the first-keyword check does not see: a comment first, several statements in one text (node-postgres),
    // MySQL's executable comments, procedures, dynamic SQL and statements that commit implicitly.
    const texts = ['/* c */ COMMIT', '-- c\nCOMMIT'];
    if (name === 'pg-fast' || name === 'pg-general') texts.push('SELECT 1; COMMIT', 'SELECT 1; COMMIT; BEGIN');
    if (name === 'mariadb') {
      await backend.query('CREATE PROCEDURE IF NOT EXISTS hs_commit_proc() BEGIN COMMIT; END');
      texts.push(
        '/*! COMMIT */',
        'CALL hs_commit_proc()',
        "EXECUTE IMMEDIATE 'COMMIT'",
        'CREATE TABLE IF NOT EXISTS hs_implicit_commit (id int)',
        'SET STATEMENT max_statement_time=100 FOR COMMIT',
      );
    }
    for (const [i, text] of texts.entries()) {
      const key = newKey();
      const userId = `hidden-${i}`;
      app.control.afterWrite = (db) => sql.raw(text).execute(db);
      const runs = app.control.runs;
      const first = await failure(app.caller(key, userId).payments.create({ amount: 1 }));
      expect([text, first.code, first.message]).toEqual([
        text,
        'INTERNAL_SERVER_ERROR',
        expect.stringMatching(/ended the call's transaction/),
      ]);
      await expect.poll(() => backend.idleInTransaction()).toBe(0);
      // A retry with the key never runs the handler again, whose payment may have committed: it fails the same way,
      // or (SQLite, whose completion cannot see that the transaction is gone) replays the result stored after all.
      app.control.afterWrite = undefined;
      for (let retry = 0; retry < 2; retry++) {
        const again = await app
          .caller(key, userId)
          .payments.create({ amount: 1 })
          .then(
            () => (sqlite ? first.message : 'succeeded'),
            (error: Error) => error.message,
          );
        expect([text, again]).toEqual([text, first.message]);
      }
      expect([text, app.control.runs - runs, await payments(userId)]).toEqual([text, 1, 1]);
    }
    // The pool is whole: calls on every connection run and commit with their results.
    for (let i = 0; i <= backend.connections; i++)
      await app.caller(newKey(), 'hidden-after').payments.create({ amount: 1 });
    expect(await payments('hidden-after')).toBe(backend.connections + 1);
  });

  it.runIf(pg || name === 'mariadb')(
    "keeps a session's transaction characteristics out of the next calls on its pooled connection",
    async () => {
      const app = makeDialectApp(backend);
      const texts = pg
        ? [
            'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
            'SET default_transaction_read_only = on',
            'SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE',
          ]
        : ['SET SESSION TRANSACTION READ ONLY', 'SET @hs = 1, autocommit = 0'];
      for (const [i, text] of texts.entries()) {
        const userId = `session-${i}`;
        app.control.afterWrite = (db) => sql.raw(text).execute(db);
        await app.caller(newKey(), userId).payments.create({ amount: 1 });
        app.control.afterWrite = undefined;
        // One call more than the pool holds, one after another: one of them runs on the connection the SET was on.
        const isolation = pg ? 'SHOW transaction_isolation' : 'SELECT 1';
        const seen: unknown[] = [];
        app.control.afterWrite = async (db) => {
          seen.push(Object.values((await sql.raw(isolation).execute(db)).rows[0] as object)[0]);
        };
        for (let n = 0; n <= backend.connections; n++)
          await app.caller(newKey(), userId).payments.create({ amount: 1 });
        expect([text, await payments(userId)]).toEqual([text, backend.connections + 2]);
        if (pg) expect([text, [...new Set(seen)]]).toEqual([text, ['read committed']]);
      }
    },
  );
});
