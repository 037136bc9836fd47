import { randomUUID } from 'node:crypto';
import { TRPCError } from '@trpc/server';
import { createMariaDbDatabase, type MariaDbDatabase } from '@trpc-idempotency/test-db';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MysqlStatements } from '../store/dialects/mysql/mysql-statements.js';
import { parseTableName } from '../store/table-name.js';
import { makeDialectApp } from './dialect-app.js';
import { createSqlitePayments, type SqlitePayments } from './dialect-backends.js';
import { expectReason, failure, reasonOf } from './expectations.js';
import { type AppDB, deferred, sleep, until } from './harness.js';

let keySeq = 0;
const newKey = () => `ll-${Date.now().toString(36)}-${++keySeq}`;

/**
 * Lease-mode liveness on MySQL / MariaDB: as on Postgres (lease-liveness.test.ts), a claim is taken over only when
 * its holder's connection is gone, never because its renewals were starved; and the lock that proves a holder alive
 * never stays on a pooled connection after its call.
 */
describe('lease liveness on mariadb', () => {
  let m: MariaDbDatabase;
  beforeAll(async () => {
    m = await createMariaDbDatabase({ max: 2 });
    await sql`CREATE TABLE payments (
      id INT AUTO_INCREMENT PRIMARY KEY, user_id VARCHAR(255) NOT NULL, amount INT NOT NULL, note TEXT
    )`.execute(m.db);
    await makeDialectApp({ db: m.db as Kysely<AppDB> }).idempotency.migrate();
  });
  afterAll(() => m?.drop());

  const paymentsOf = async (userId: string) =>
    (
      await sql<{ amount: number }>`SELECT amount FROM payments WHERE user_id = ${userId} ORDER BY id`.execute(m.db)
    ).rows.map((r) => Number(r.amount));
  /** The one connection of a pool of 1 (mysql2 hands the idle one out again). */
  const connectionId = async (db: Kysely<any>) =>
    Number((await sql<{ id: number }>`SELECT CONNECTION_ID() AS id`.execute(db)).rows[0]?.id);
  const statements = new MysqlStatements(parseTableName('idempotency_keys'), { mariadb: true });
  /** The connection holding the key's lease lock (the apps' scope is `user:<userId>`), or null. */
  const lockHolder = async (key: string, userId: string) => {
    const name = statements.leaseLockName({ scope: `user:${userId}`, key });
    const id = (await sql.raw<{ id: unknown }>(`SELECT IS_USED_LOCK(${name}) AS id`).execute(m.db)).rows[0]?.id;
    return id == null ? null : Number(id);
  };
  /** Named locks still held by the one connection of `db`'s pool of 1 (released by the count). */
  const leakedLocks = async (db: Kysely<any>) =>
    Number((await sql<{ n: number }>`SELECT RELEASE_ALL_LOCKS() AS n`.execute(db)).rows[0]?.n);

  // The handler takes 4× the lease.
  it('never takes over a live holder whose renewals cannot get a connection (pool max 1)', async () => {
    // Instance A has one connection, held by its handler's transaction: no renewal of A gets through.
    const dbA = m.connect({ max: 1 }) as Kysely<AppDB>;
    const a = makeDialectApp({ db: dbA }, { mode: 'lease', lease: 300 });
    const b = makeDialectApp({ db: m.connect({ max: 2 }) as Kysely<AppDB> }, { mode: 'lease', lease: 300, wait: 0 });
    // Well past the lease, which nothing renewed: the holder is alive, so it keeps the key.
    await expectLiveHolderKept(a, b, 1_200, m.db);
    expect(await leakedLocks(dbA)).toBe(0);
  });

  it('takes over a holder whose connection was killed, once its lease ran out, and fences the holder off', async () => {
    const dbA = m.connect({ max: 1 }) as Kysely<AppDB>;
    const a = makeDialectApp({ db: dbA }, { mode: 'lease', lease: 300 });
    const b = makeDialectApp(
      { db: m.connect({ max: 2 }) as Kysely<AppDB> },
      { mode: 'lease', lease: 300, wait: 10_000 },
    );
    const holder = await connectionId(dbA);
    const gate = deferred();
    a.control.gate = gate.promise;
    const key = newKey();
    const original = a.caller(key, 'live-dead').payments.create({ amount: 6 });
    original.catch(() => {}); // Awaited below; a failure before that must not surface as an unhandled rejection.
    await until(() => a.control.atGate === 1);
    expect(await lockHolder(key, 'live-dead')).toBe(holder);
    // The holder's connection dies (as when its server crashes): whatever proved it alive goes with it.
    await sql.raw(`KILL ${holder}`).execute(m.db);
    const taken = await b.caller(key, 'live-dead').payments.create({ amount: 6 });
    expect(b.control.takeovers).toEqual([true]);
    gate.resolve();
    await expectReason(original, 'in_progress', 'CONFLICT');
    expect(await a.caller(key, 'live-dead').payments.create({ amount: 6 })).toEqual(taken);
    // The dead holder's write died with its transaction: one payment.
    expect(await paymentsOf('live-dead')).toEqual([6]);
  });

  // Pool max 1.
  it('never takes over a live holder waiting for a pooled connection between claim and handler', async () => {
    // Instance A (one connection) gets X and Y at once: one's handler holds the connection at the gate while the
    // other waits for it. A waiting holder is alive: past its lease (no renewal of A gets a connection either), a
    // duplicate on B must not take its key over. It may answer 409, or run the key itself if A holds no claim on
    // it yet (A then replays B's result): either way each key's handler runs once and A's calls succeed.
    const a = makeDialectApp({ db: m.connect({ max: 1 }) as Kysely<AppDB> }, { mode: 'lease', lease: 300 });
    const b = makeDialectApp({ db: m.connect({ max: 2 }) as Kysely<AppDB> }, { mode: 'lease', lease: 300, wait: 0 });
    const runsOf = new Map<number, number>();
    const countRun = (input: { amount: number }) => {
      runsOf.set(input.amount, (runsOf.get(input.amount) ?? 0) + 1);
      return { execution: randomUUID(), amount: input.amount };
    };
    a.control.result = countRun;
    b.control.result = countRun;
    const gate = deferred();
    a.control.gate = gate.promise;
    const [x, y] = [newKey(), newKey()];
    const onA = [
      a.caller(x, 'live-waiting').payments.create({ amount: 1 }),
      a.caller(y, 'live-waiting').payments.create({ amount: 2 }),
    ];
    for (const p of onA) p.catch(() => {}); // Awaited below.
    await until(() => a.control.atGate === 1);
    await sleep(600);
    const onB = await Promise.allSettled([
      b.caller(x, 'live-waiting').payments.create({ amount: 1 }),
      b.caller(y, 'live-waiting').payments.create({ amount: 2 }),
    ]);
    gate.resolve();
    const results = await Promise.all(onA);
    expect(b.events.filter((e) => e.type === 'taken_over').map((e) => e.key)).toEqual([]);
    expect([...runsOf.entries()].sort()).toEqual([
      [1, 1],
      [2, 1],
    ]);
    onB.forEach((settled, i) => {
      if (settled.status === 'fulfilled') expect(settled.value).toEqual(results[i]);
      else expect(reasonOf(settled.reason)).toBe('in_progress');
    });
    expect((await paymentsOf('live-waiting')).sort()).toEqual([1, 2]);
  });

  it('runs each key once when 4 instances with small pools claim the same 20 keys at once (lease 150 ms)', async () => {
    // Each instance's calls queue for its 2 connections between their claims and their handlers' transactions, far
    // past the lease, renewals included: no instance died, so none may take another's key over.
    const apps = [0, 1, 2, 3].map(() =>
      makeDialectApp({ db: m.connect({ max: 2 }) as Kysely<AppDB> }, { mode: 'lease', lease: 150, wait: 20_000 }),
    );
    const runsOf = new Map<number, number>();
    for (const app of apps) {
      app.control.delayMs = 100;
      app.control.result = (input) => {
        runsOf.set(input.amount, (runsOf.get(input.amount) ?? 0) + 1);
        return { execution: `${input.amount}-${runsOf.get(input.amount)}`, amount: input.amount };
      };
    }
    const keys = Array.from({ length: 20 }, () => newKey());
    const settled = await Promise.allSettled(
      apps.flatMap((app) => keys.map((key, i) => app.caller(key, 'storm').payments.create({ amount: i + 1 }))),
    );
    const takenOver = apps.flatMap((app) => app.events.filter((e) => e.type === 'taken_over'));
    const twice = [...runsOf.entries()].filter(([, n]) => n > 1);
    expect({ twice, takenOver: takenOver.length }).toEqual({ twice: [], takenOver: 0 });
    expect(runsOf.size).toBe(20);
    expect(
      settled.filter((s) => s.status === 'rejected').map((s) => String((s as PromiseRejectedResult).reason)),
    ).toEqual([]);
    expect((await paymentsOf('storm')).sort((p, q) => p - q)).toEqual(keys.map((_, i) => i + 1));
  });

  /**
   * What the statements between a lease claim and its handler guarantee. A claim that inserted its row took the key's
   * lock in that INSERT (`WHERE GET_LOCK(…, 0) = 1`) on the connection its handler then runs on: the lock is held from
   * the claim on, so no takeover can come between. A takeover of an expired *completed* row takes no lock in its
   * UPDATE (only an in_progress row's takeover tries it): there the handler's lock check takes it, and the ownership
   * read after it tells whether the key was taken over while that check waited for the lock.
   */
  describe('between the claim and the handler', () => {
    /** Runs `key` once with a short ttl, then waits (polling the row) until it has expired: a takeover comes next. */
    const expiredDoneRow = async (key: string, userId: string) => {
      const first = makeDialectApp({ db: m.db as Kysely<AppDB> }, { mode: 'lease', ttl: 100, cache: false });
      await first.caller(key, userId).payments.create({ amount: 1 });
      await expect
        .poll(async () => Number((await sql.raw<{ n: number }>(expiredCount(key)).execute(m.db)).rows[0]?.n))
        .toBe(1);
    };
    const expiredCount = (key: string) =>
      `SELECT count(*) AS n FROM idempotency_keys WHERE \`key\` = '${key}' AND status = 'done'
        AND expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`;

    /** Runs `key` on an instance of one connection, held at the gate: that connection must hold the key's lock. */
    const expectHandlerHoldsLock = async (key: string, userId: string) => {
      const dbA = m.connect({ max: 1 }) as Kysely<AppDB>;
      const a = makeDialectApp({ db: dbA }, { mode: 'lease', lease: 300, cache: false });
      const holder = await connectionId(dbA);
      const gate = deferred();
      a.control.gate = gate.promise;
      const call = a.caller(key, userId).payments.create({ amount: 2 });
      await until(() => a.control.atGate === 1);
      expect(a.control.takeovers).toEqual([false]);
      // Without the lock a live holder whose renewals are starved (pool of 1) would be taken over once its lease ran
      // out.
      expect(await lockHolder(key, userId)).toBe(holder);
      gate.resolve();
      await call;
      expect(await leakedLocks(dbA)).toBe(0);
    };

    it('a claim that inserted its row holds the key lock from its INSERT: the handler runs holding it', async () => {
      await expectHandlerHoldsLock(newKey(), 'claim-lock');
    });

    // Its UPDATE took none.
    it('a takeover of an expired completed row takes the key lock before its handler runs', async () => {
      const key = newKey();
      await expiredDoneRow(key, 'done-takeover');
      await expectHandlerHoldsLock(key, 'done-takeover');
    });

    it('a takeover whose lock check waited while another call took the key over never runs its handler', async () => {
      const key = newKey();
      await expiredDoneRow(key, 'late-lock');
      // Another connection holds the key's lock (as a taker or a finishing owner does for a moment).
      const other = m.connect({ max: 1 });
      const name = statements.leaseLockName({ scope: 'user:late-lock', key });
      expect(Number((await sql.raw<{ l: number }>(`SELECT GET_LOCK(${name}, 0) AS l`).execute(other)).rows[0]?.l)).toBe(
        1,
      );
      const t = makeDialectApp({ db: m.connect({ max: 2 }) as Kysely<AppDB> }, { mode: 'lease', wait: 1_000 });
      const call = t.caller(key, 'late-lock').payments.create({ amount: 3 });
      call.catch(() => {}); // Awaited below.
      // The takeover of the completed row committed (it needs no lock); its lock check now waits for the lock.
      await expect
        .poll(
          async () =>
            Number(
              (
                await sql<{ n: number }>`SELECT count(*) AS n FROM information_schema.processlist
                  WHERE DB = database() AND STATE = 'User lock'`.execute(m.db)
              ).rows[0]?.n,
            ),
          { timeout: 10_000 },
        )
        .toBe(1);
      // Meanwhile the key is taken over by someone else, whose lease is live; then the lock is let go.
      await sql
        .raw(`UPDATE idempotency_keys SET token = 'someone-else', locked_until = locked_until + 60000
        WHERE \`key\` = '${key}'`)
        .execute(m.db);
      await sql.raw(`SELECT RELEASE_LOCK(${name})`).execute(other);
      // The ownership read after the lock sees the other owner: this call's handler never runs, it waits as a
      // duplicate (nobody completes the key) and answers 409.
      await expectReason(call, 'in_progress', 'CONFLICT');
      expect(t.control.runs).toBe(0);
      expect(await paymentsOf('late-lock')).toEqual([1]);
      await other.destroy();
    });
  });

  describe('gives the pooled connection back without the lease lock', () => {
    it('after a success (the handler held it while it ran)', async () => {
      const dbA = m.connect({ max: 1 }) as Kysely<AppDB>;
      const a = makeDialectApp({ db: dbA }, { mode: 'lease', lease: 300 });
      const holder = await connectionId(dbA);
      const gate = deferred();
      a.control.gate = gate.promise;
      const key = newKey();
      const call = a.caller(key, 'free-ok').payments.create({ amount: 1 });
      await until(() => a.control.atGate === 1);
      expect(await lockHolder(key, 'free-ok')).toBe(holder);
      gate.resolve();
      await call;
      expect(await lockHolder(key, 'free-ok')).toBeNull();
      expect(await leakedLocks(dbA)).toBe(0);
    });

    it('after the handler threw (5xx: claim freed; 4xx: error stored)', async () => {
      const dbA = m.connect({ max: 1 }) as Kysely<AppDB>;
      const a = makeDialectApp({ db: dbA }, { mode: 'lease', lease: 300 });
      a.control.throwAfterWrite = () => new TRPCError({ code: 'BAD_GATEWAY', message: 'provider down' });
      await failure(a.caller(newKey(), 'free-throw').payments.create({ amount: 2 }));
      expect(await leakedLocks(dbA)).toBe(0);
      a.control.throwAfterWrite = () => new TRPCError({ code: 'FORBIDDEN', message: 'no' });
      await failure(a.caller(newKey(), 'free-throw').payments.create({ amount: 2 }));
      expect(await leakedLocks(dbA)).toBe(0);
      expect(await paymentsOf('free-throw')).toEqual([]);
    });

    it('after a claim that lost (the lock busy with a live holder; the key already done: a replay)', async () => {
      const a = makeDialectApp({ db: m.connect({ max: 1 }) as Kysely<AppDB> }, { mode: 'lease', lease: 300 });
      const dbC = m.connect({ max: 1 }) as Kysely<AppDB>;
      const gate = deferred();
      a.control.gate = gate.promise;
      const key = newKey();
      const original = a.caller(key, 'free-lost').payments.create({ amount: 4 });
      await until(() => a.control.atGate === 1);
      // The holder's connection holds the lock: the duplicate's claim finds it busy and inserts nothing.
      const busy = makeDialectApp({ db: dbC }, { mode: 'lease', lease: 300, wait: 0 });
      await expectReason(busy.caller(key, 'free-lost').payments.create({ amount: 4 }), 'in_progress', 'CONFLICT');
      expect(await leakedLocks(dbC)).toBe(0);
      gate.resolve();
      const result = await original;
      // The key is done: the claim takes the free lock, its INSERT finds the row, the call replays it.
      const replay = makeDialectApp({ db: dbC }, { mode: 'lease', lease: 300 });
      expect(await replay.caller(key, 'free-lost').payments.create({ amount: 4 })).toEqual(result);
      expect(await lockHolder(key, 'free-lost')).toBeNull();
      expect(await leakedLocks(dbC)).toBe(0);
      expect([a.control.runs, busy.control.runs, replay.control.runs]).toEqual([1, 0, 0]);
    });

    it('after the completion failed (the token was replaced: nothing commits)', async () => {
      const dbA = m.connect({ max: 2 }) as Kysely<AppDB>;
      const a = makeDialectApp({ db: dbA }, { mode: 'lease', lease: 300 });
      const gate = deferred();
      a.control.gate = gate.promise;
      const key = newKey();
      const call = a.caller(key, 'free-fenced').payments.create({ amount: 3 });
      await until(() => a.control.atGate === 1);
      expect(await lockHolder(key, 'free-fenced')).not.toBeNull();
      await sql`UPDATE idempotency_keys SET token = ${'someone-else'} WHERE \`key\` = ${key}`.execute(m.db);
      gate.resolve();
      await expectReason(call, 'in_progress', 'CONFLICT');
      expect(await lockHolder(key, 'free-fenced')).toBeNull();
      // Both connections of A's pool: neither may keep a lock.
      const [first, second] = await Promise.all([leakedLocksHeld(dbA), leakedLocksHeld(dbA)]);
      expect(first + second).toBe(0);
      expect(await paymentsOf('free-fenced')).toEqual([]);
    });
  });

  /** Like leakedLocks, but keeps the connection a moment so two calls get the pool's two connections. */
  const leakedLocksHeld = (db: Kysely<any>) =>
    db.connection().execute(async (c) => {
      await sleep(50);
      return leakedLocks(c);
    });
});

/**
 * SQLite: the running holder's transaction holds the database's write lock, so no other connection (or process) can
 * take its claim over while it lives, however late its renewals (they queue behind that transaction). Instances with
 * their own connections to one file (each another process, as far as SQLite's locks go): `wait` bounds a duplicate's
 * claim, and write-lock contention never makes a live holder give its key up after its handler ran.
 */
describe.each(['sqlite', 'libsql'] as const)('lease liveness on %s', (name) => {
  let file: SqlitePayments['file'];
  let open: SqlitePayments['open'];
  beforeAll(async () => {
    ({ file, open } = await createSqlitePayments(name));
    await makeDialectApp({ db: open() }).idempotency.migrate();
  });
  afterAll(() => file?.drop());

  it('never takes over a live holder whose renewals cannot run (handler 8× the lease)', async () => {
    const a = makeDialectApp({ db: open() }, { mode: 'lease', lease: 300 });
    const b = makeDialectApp({ db: open() }, { mode: 'lease', lease: 300, wait: 0 });
    // Far longer than the duplicate's bound on the write lock (its `wait`, here 0: a 50 ms floor) after the lease
    // lapsed. A's renewals queue behind its own transaction, which holds the write lock: the duplicate cannot get past
    // it to take the claim over within its bound, and answers 409.
    await expectLiveHolderKept(a, b, 2_400, open());
  });

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

  // Lease 300 ms, handler 100 ms, wait 20 s.
  it('runs each key once and answers every copy when four instances send the same keys at once', async () => {
    const apps = Array.from({ length: 4 }, () =>
      makeDialectApp({ db: open() }, { mode: 'lease', lease: 300, wait: 20_000 }),
    );
    for (const app of apps) app.control.delayMs = 100;
    const keys = Array.from({ length: 20 }, () => newKey());
    const settled = await Promise.allSettled(
      keys.flatMap((key) => apps.map((app) => app.caller(key, 'storm').payments.create({ amount: 1 }))),
    );
    const runs = apps.reduce((sum, app) => sum + app.control.runs, 0);
    const { rows } = await sql<{ n: number }>`SELECT count(*) AS n FROM payments WHERE user_id = ${'storm'}`.execute(
      open(),
    );
    // The handler (an outside effect) runs once per key.
    expect({ runs, payments: Number(rows[0]?.n) }).toEqual({ runs: keys.length, payments: keys.length });
    // And every copy gets the key's one result: `wait` (20 s) is never used up. A claim whose lease lapsed while its
    // instance's other handlers held the write lock, before its own handler's transaction began, can be taken over;
    // its handler never ran, so its caller waits for the new owner's result like any duplicate, not 409.
    expect(
      settled.filter((s) => s.status === 'rejected').map((s) => reasonOf((s as PromiseRejectedResult).reason)),
    ).toEqual([]);
    const values = settled.map((s) => (s as PromiseFulfilledResult<unknown>).value);
    keys.forEach((_, i) => {
      const copies = values.slice(i * apps.length, (i + 1) * apps.length);
      for (const copy of copies) expect(copy).toEqual(copies[0]);
    });
  });
});

/**
 * Holder `a` runs a `delayMs` handler with no renewal getting through; past its lease, a duplicate on `b` (wait 0)
 * must answer 409, and after the original's completion replay it: one execution, one payment.
 */
async function expectLiveHolderKept(
  a: ReturnType<typeof makeDialectApp>,
  b: ReturnType<typeof makeDialectApp>,
  delayMs: number,
  db: Kysely<any>,
): Promise<void> {
  a.control.delayMs = delayMs;
  const key = newKey();
  const original = a.caller(key, 'live-busy').payments.create({ amount: 5 });
  await until(() => a.control.runs === 1);
  await sleep(600);
  await expectReason(b.caller(key, 'live-busy').payments.create({ amount: 5 }), 'in_progress', 'CONFLICT');
  const result = await original;
  expect(await b.caller(key, 'live-busy').payments.create({ amount: 5 })).toEqual(result);
  expect([a.control.runs, b.control.runs]).toEqual([1, 0]);
  const { rows } = await sql<{ amount: number }>`SELECT amount FROM payments WHERE user_id = ${'live-busy'}`.execute(
    db,
  );
  expect(rows.map((r) => Number(r.amount))).toEqual([5]);
}
