import { TRPCError } from '@trpc/server';
import { createMariaDbDatabase, type MariaDbDatabase } from '@trpc-idempotency/test-db';
import { type DatabaseConnection, type Dialect, type Driver, Kysely, MysqlDialect, sql } from 'kysely';
import { createPool } from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { defaultSerializer } from '../serialize/serializer.js';
import { encodeStoredResponse } from '../serialize/stored-response.js';
import { makeDialectApp } from './dialect-app.js';
import { expectReason, failure, reasonOf } from './expectations.js';
import { type AppDB, deferred, sleep, t, until } from './harness.js';

let keySeq = 0;
const newKey = () => `m-${Date.now().toString(36)}-${++keySeq}`;

/**
 * Wraps a dialect so that its connections answer `SELECT VERSION() AS v` with `version`. MySQL 8 is not
 * installable here: as "MySQL 8.0.36" the store sends the SQL it sends to MySQL (SET SESSION around the claim
 * instead of MariaDB's SET STATEMENT … FOR) to the MariaDB server.
 */
function reportingVersion(dialect: Dialect, version: string): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createDriver: (): Driver => {
      const driver = dialect.createDriver();
      const inner = new WeakMap<DatabaseConnection, DatabaseConnection>();
      const innerOf = (c: DatabaseConnection) => inner.get(c) ?? c;
      return {
        init: () => driver.init(),
        acquireConnection: async () => {
          const c = await driver.acquireConnection();
          const w: DatabaseConnection = {
            executeQuery: (q) =>
              q.sql === 'SELECT VERSION() AS v'
                ? Promise.resolve({ rows: [{ v: version }] as never[] })
                : c.executeQuery(q),
            streamQuery: (q, n) => c.streamQuery(q, n),
          };
          inner.set(w, c);
          return w;
        },
        beginTransaction: (c, s) => driver.beginTransaction(innerOf(c), s),
        commitTransaction: (c) => driver.commitTransaction(innerOf(c)),
        rollbackTransaction: (c) => driver.rollbackTransaction(innerOf(c)),
        releaseConnection: (c) => driver.releaseConnection(innerOf(c)),
        destroy: () => driver.destroy(),
      };
    },
  };
}

describe.each(['mariadb', 'mysql8-sql'] as const)('MySQL dialect specifics (%s)', (variant) => {
  let m: MariaDbDatabase;
  const opened: Kysely<AppDB>[] = [];
  const instance = () => {
    const db =
      variant === 'mariadb'
        ? (m.connect() as Kysely<AppDB>)
        : new Kysely<AppDB>({ dialect: reportingVersion(m.dialect(), '8.0.36') });
    opened.push(db);
    return { db };
  };
  beforeAll(async () => {
    m = await createMariaDbDatabase();
    await sql`CREATE TABLE payments (
      id INT AUTO_INCREMENT PRIMARY KEY, user_id TEXT NOT NULL, amount INT NOT NULL, note TEXT
    )`.execute(m.db);
    await makeDialectApp(instance()).idempotency.migrate();
  });
  afterAll(async () => {
    await Promise.allSettled(opened.map((k) => k.destroy()));
    await m?.drop();
  });

  it('bounds a duplicate wait in whole seconds (wait 300 ms waits 1 s), then answers 409 in_progress', async () => {
    const a = makeDialectApp(instance());
    const key = newKey();
    const gate = deferred();
    a.control.gate = gate.promise;
    const original = a.caller(key, 'round').payments.create({ amount: 1 });
    await until(() => a.control.runs === 1);
    const b = makeDialectApp(instance(), { wait: 300 });
    const started = performance.now();
    await expectReason(b.caller(key, 'round').payments.create({ amount: 1 }), 'in_progress', 'CONFLICT');
    const waited = performance.now() - started;
    gate.resolve();
    await original;
    // A lower bound only (a loaded machine may take longer): the wait rounds up to 1 s, never down to 0.
    expect(waited).toBeGreaterThanOrEqual(900);
    expect(b.control.runs).toBe(0);
  });

  // The session's lock-wait timeout is the app's one inside the handler and after it.
  it("never bounds the handler's own locks with `wait`: its lock-wait timeout stays the app's", async () => {
    const db = instance().db;
    await sql`SET GLOBAL innodb_lock_wait_timeout = 50`.execute(db);
    const idem = createIdempotency({ db, scope: () => 'locks', wait: 1000 });
    const router = t.router({
      m: t.procedure.use(idem.middleware).mutation(async ({ ctx }) => {
        const { rows } = await sql<{ v: number }>`SELECT @@SESSION.innodb_lock_wait_timeout AS v`.execute(
          ctx.idempotency.db,
        );
        return Number(rows[0]!.v);
      }),
    });
    expect(await router.createCaller({ userId: 'x', headers: { 'idempotency-key': newKey() } }).m()).toBe(50);
  });

  it('lets exactly one duplicate run after the original rolls back (5xx), never a 500 on a deadlock', async () => {
    const apps = [makeDialectApp(instance()), makeDialectApp(instance()), makeDialectApp(instance())];
    const key = newKey();
    const gate = deferred();
    apps[0]!.control.gate = gate.promise;
    apps[0]!.control.throwAfterWrite = () => new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'boom' });
    const original = apps[0]!
      .caller(key, 'deadlock')
      .payments.create({ amount: 2 })
      .catch((e: TRPCError) => e.code);
    await until(() => apps[0]!.control.runs === 1);
    const duplicates = Array.from({ length: 20 }, (_, i) =>
      apps[1 + (i % 2)]!.caller(key, 'deadlock')
        .payments.create({ amount: 2 })
        .then(
          (r) => JSON.stringify(r),
          (e: TRPCError) => e.code,
        ),
    );
    await sleep(300);
    gate.resolve();
    expect(await original).toBe('INTERNAL_SERVER_ERROR');
    const outcomes = await Promise.all(duplicates);
    expect(apps[1]!.control.runs + apps[2]!.control.runs).toBe(1);
    // Each duplicate replays the one re-run's result, or (a deadlock victim past its retries) answers 409.
    const answers = outcomes.filter((o) => o !== 'CONFLICT');
    expect(new Set(answers).size).toBe(1);
    expect(outcomes.every((o) => o !== 'INTERNAL_SERVER_ERROR')).toBe(true);
    const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM payments WHERE user_id = 'deadlock'`.execute(
      m.db,
    );
    expect(Number(rows[0]!.n)).toBe(1);
  });

  // Cut, two scopes would share a row.
  it('refuses a scope longer than the table holds as a 400, before MySQL could cut it', async () => {
    const app = makeDialectApp(instance());
    // The scope is `user:<id>`: 2048 bytes fit, one more is refused before MySQL could truncate it.
    const fits = 'x'.repeat(2048 - 'user:'.length);
    expect(await app.caller(newKey(), fits).payments.create({ amount: 1 })).toMatchObject({ amount: 1 });
    // Every retry sends the same scope: a client error like NUL in a scope, never a retryable 500. Counted in
    // UTF-8 bytes: 'é' is two, so 2047 of these characters are over.
    for (const scope of [`${fits}y`, 'é'.repeat(2047 - 'user:'.length)]) {
      const error = await failure(app.caller(newKey(), scope).payments.create({ amount: 1 }));
      expect(error.code).toBe('BAD_REQUEST');
      expect(reasonOf(error)).toBeUndefined();
      expect(error.message).toMatch(/scope .* 2048 bytes/);
      expect(error.message).not.toMatch(/postgres/i);
    }
    expect(app.control.runs).toBe(1);
  });

  // One statement carries max_allowed_packet. Writes rolled back, key freed.
  it('refuses a result larger than one statement can carry as response_too_large', async () => {
    const packet = Number((await sql<{ p: number }>`SELECT @@max_allowed_packet AS p`.execute(m.db)).rows[0]?.p);
    // The result travels as a hex literal (two characters a byte) beside at most 16 KiB of the rest of the statement.
    const ceiling = Math.floor((packet - 16 * 1024) / 2);
    const envelope = encodeStoredResponse({ ok: true, data: { s: '' } }, defaultSerializer).length;
    // The longest scope and key: the most statement around the result.
    const key = (tag: string) => `${newKey()}-${tag}-`.padEnd(255, 'k');
    const amountsOf = async (user: string) =>
      (await m.db.selectFrom('payments').select('amount').where('user_id', '=', user).execute()).map((r) =>
        Number(r.amount),
      );
    for (const mode of ['transaction', 'lease'] as const) {
      const user = `${mode[0]}`.padEnd(2048 - 'user:'.length, 'x');
      // maxResponseBytes far above the server's ceiling: only the server's limit applies.
      const app = makeDialectApp(instance(), { mode, maxResponseBytes: packet * 2 });
      app.control.result = (input) => ({ s: 'z'.repeat(input.amount - envelope) });
      const k = key(mode);
      // Far over what the server takes (the statement alone over max_allowed_packet), then one byte over the ceiling.
      for (const bytes of [Math.floor(packet / 2) + 1, ceiling + 1]) {
        const runs = app.control.runs;
        const error = await expectReason(
          app.caller(k, user).payments.create({ amount: bytes }),
          'response_too_large',
          'INTERNAL_SERVER_ERROR',
        );
        expect(error.message).toContain(`The result (${bytes} bytes)`);
        expect(error.message).toMatch(/max_allowed_packet/);
        expect(app.control.runs).toBe(runs + 1);
      }
      // Nothing was stored, the handler's writes rolled back, the key is free: the same key runs a smaller result.
      expect(await amountsOf(user)).toEqual([]);
      const done = (await app.caller(k, user).payments.create({ amount: ceiling })) as { s: string };
      expect(done.s).toHaveLength(ceiling - envelope);
      // Stored whole: an instance without it cached replays it from the row.
      const fresh = makeDialectApp(instance(), { mode, maxResponseBytes: packet * 2, cache: false });
      const replayed = (await fresh.caller(k, user).payments.create({ amount: ceiling })) as { s: string };
      expect(replayed.s).toHaveLength(ceiling - envelope);
      expect(fresh.control.runs).toBe(0);
      expect(await amountsOf(user)).toEqual([ceiling]);
    }
    // Six results of 8 MiB built and sent, two of them hex-encoded: 22-40 s on a loaded machine, past the default
    // 30 s. A bound on the test, never a timing check.
  }, 120_000);

  /**
   * An instance whose connections run at `level` (the app's own session default, whatever the server's global one),
   * with the statements it sends (Kysely's log).
   */
  const instanceAt = (level: 'REPEATABLE READ') => {
    const pool = createPool({ uri: m.url, connectionLimit: 2 });
    pool.on('connection', (c) => {
      c.on('error', () => {});
      c.query(`SET SESSION TRANSACTION ISOLATION LEVEL ${level}`, () => {});
    });
    const base = new MysqlDialect({ pool });
    const sent: string[] = [];
    const db = new Kysely<AppDB>({
      dialect: variant === 'mariadb' ? base : reportingVersion(base, '8.0.36'),
      log: (e) => {
        sent.push(e.query.sql);
      },
    });
    opened.push(db);
    return { db, sent };
  };
  /**
   * Claims of this database being executed (a duplicate's claim blocked on the original's row). The process list, not
   * innodb_trx: MariaDB 10.11 does not always list a transaction whose INSERT waits there.
   */
  const claimsRunning = async () =>
    Number(
      (
        await sql<{ n: number }>`SELECT count(*) AS n FROM information_schema.processlist
          WHERE DB = database() AND ID <> CONNECTION_ID() AND COMMAND = 'Query'
            AND INFO LIKE '%INSERT INTO \`idempotency_keys\`%'`.execute(m.db)
      ).rows[0]?.n,
    );

  // The claim is the first statement of its transaction and takes no snapshot (an INSERT, or a takeover's UPDATE);
  // the duplicate's read of the row after its claim waited is its first consistent read, so under InnoDB's
  // REPEATABLE READ its snapshot is taken then, after the original committed. A read whose snapshot predates the
  // original's commit would see no row (or the expired one), and the duplicate would claim again: one claim and one
  // read per duplicate is what this counts.
  it.each(['a new key', 'an expired key the original takes over'] as const)(
    'a duplicate that blocked on the claim of %s reads the committed row (the app at REPEATABLE READ): ' +
      'one claim, one read, a replay',
    async (variant) => {
      const key = newKey();
      const user = variant === 'a new key' ? 'rr-new' : 'rr-expired';
      if (variant !== 'a new key') {
        await makeDialectApp(instance(), { ttl: 100, cache: false }).caller(key, user).payments.create({ amount: 1 });
        await expect
          .poll(
            async () => {
              const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM idempotency_keys
              WHERE \`key\` = ${key}
              AND expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`.execute(
                m.db,
              );
              return Number(rows[0]?.n);
            },
            { timeout: 10_000 },
          )
          .toBe(1);
      }
      const a = makeDialectApp(instanceAt('REPEATABLE READ'));
      const gate = deferred();
      a.control.gate = gate.promise;
      const original = a.caller(key, user).payments.create({ amount: 7 });
      await until(() => a.control.atGate === 1);
      const waiting = instanceAt('REPEATABLE READ');
      const b = makeDialectApp(waiting, { wait: 20_000 });
      const duplicate = b.caller(key, user).payments.create({ amount: 7 });
      // Its transaction began before the original commits: a snapshot taken at its start would miss the commit.
      await expect.poll(claimsRunning, { timeout: 10_000 }).toBe(1);
      gate.resolve();
      const result = await original;
      expect(await duplicate).toEqual(result);
      expect(b.control.runs).toBe(0);
      const ours = (pattern: RegExp) => waiting.sent.filter((text) => pattern.test(text)).length;
      expect({
        claims: ours(/^(SET STATEMENT .* FOR )?(INSERT INTO|UPDATE) `idempotency_keys`/s),
        reads: ours(/^SELECT t\.status/),
      }).toEqual({ claims: 1, reads: 1 });
    },
  );

  it.each(['transaction', 'lease'] as const)(
    "runs the handler's transaction at the app's own isolation level " +
      "(%s mode; REPEATABLE READ: a second read sees the first one's snapshot)",
    async (mode) => {
      const { db } = instanceAt('REPEATABLE READ');
      const idem = createIdempotency({ db, scope: () => 'isolation', mode });
      const other = `iso-${mode}`;
      const router = t.router({
        m: t.procedure.use(idem.middleware).mutation(async ({ ctx }) => {
          const count = async () =>
            Number(
              (
                await sql<{ n: number }>`SELECT count(*) AS n FROM payments WHERE user_id = ${other}`.execute(
                  ctx.idempotency.db,
                )
              ).rows[0]?.n,
            );
          const first = await count();
          // Another connection commits a row meanwhile: READ COMMITTED would show it to the second read.
          await sql`INSERT INTO payments (user_id, amount) VALUES (${other}, 1)`.execute(m.db);
          return { first, second: await count() };
        }),
      });
      const caller = router.createCaller({ userId: 'x', headers: { 'idempotency-key': newKey() } });
      expect(await caller.m()).toEqual({ first: 0, second: 0 });
    },
  );

  it('answers 503 store_unavailable when the server cannot be reached, without running the handler', async () => {
    const url = new URL(m.url);
    url.port = '1'; // nothing listens there
    const down = new Kysely<AppDB>({ dialect: new MysqlDialect({ pool: createPool({ uri: url.toString() }) }) });
    opened.push(down);
    const app = makeDialectApp({ db: down });
    await expectReason(
      app.caller(newKey(), 'down').payments.create({ amount: 1 }),
      'store_unavailable',
      'SERVICE_UNAVAILABLE',
    );
    expect(app.control.runs).toBe(0);
  });
});
