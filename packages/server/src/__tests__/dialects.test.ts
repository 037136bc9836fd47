import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprint } from '../fingerprint/fingerprint.js';
import { MysqlStatements } from '../store/dialects/mysql/mysql-statements.js';
import { parseTableName } from '../store/table-name.js';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { expectReason, failure } from './expectations.js';
import { deferred, sleep, until } from './harness.js';

let keySeq = 0;
const newKey = () => `d-${Date.now().toString(36)}-${++keySeq}`;
/** MySQL hands binary columns back as bytes. */
const str = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v);

describe.each(DIALECT_BACKENDS)('core behaviours on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  /** Another "server instance": pg pools, MariaDB pools, SQLite connections to the same file. PGlite has none. */
  const several = name !== 'pglite';

  const paymentsOf = async (userId: string) =>
    (
      await backend.query<{ amount: number }>(
        `SELECT amount FROM payments WHERE user_id = ${backend.text(userId)} ORDER BY id`,
      )
    ).map((r) => Number(r.amount));
  const keyRow = async (key: string) => {
    const rows = await backend.query<Record<string, unknown>>(
      `SELECT status, token, response FROM idempotency_keys WHERE ${name === 'mariadb' ? '`key`' : 'key'} = ${backend.text(key)}`,
    );
    return rows.map((r) => ({ status: str(r.status), token: str(r.token), response: str(r.response) }))[0];
  };
  const insertRow = async (row: {
    scope: string;
    key: string;
    fingerprint: string;
    status: string;
    token?: string;
    lockedInMs?: number;
    expiresInMs: number;
    table?: string;
  }) => {
    const k = name === 'mariadb' ? '`key`' : 'key';
    await backend.query(`INSERT INTO ${row.table ?? 'idempotency_keys'} (scope, ${k}, fingerprint, path, status, token, locked_until, created_at, expires_at)
      VALUES (${backend.text(row.scope)}, ${backend.text(row.key)}, ${backend.text(row.fingerprint)}, 'payments.create',
        ${backend.text(row.status)}, ${row.token ? backend.text(row.token) : 'NULL'},
        ${row.lockedInMs === undefined ? 'NULL' : backend.at(row.lockedInMs)}, ${backend.at(0)}, ${backend.at(row.expiresInMs)})`);
  };

  it('runs the handler once and replays its result, also from the database to an instance without it cached', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    const first = await app.caller(key, 'once').payments.create({ amount: 10 });
    expect(await app.caller(key, 'once').payments.create({ amount: 10 })).toEqual(first);
    const fresh = makeDialectApp(backend, { cache: false });
    expect(await fresh.caller(key, 'once').payments.create({ amount: 10 })).toEqual(first);
    expect(app.control.runs + fresh.control.runs).toBe(1);
    expect(await paymentsOf('once')).toEqual([10]);
    expect(app.events.map((e) => e.type)).toEqual(['executed', 'replayed']);
    expect((await keyRow(key))?.status).toBe('done');
  });

  it('compares keys and scopes byte-exact: abc ≠ ABC and k ≠ "k " (no case folding, no PAD SPACE)', async () => {
    const app = makeDialectApp(backend, { cache: false });
    // Keys are visible ASCII (no space); scopes may end in one.
    const calls: [string, string][] = [
      ['abc', 'k'],
      ['ABC', 'k'],
      ['abc', 'K'],
      ['abc', 'k '],
      ['abc', 'k  '],
    ];
    const first = [];
    for (const [key, user] of calls) first.push(await app.caller(key, user).payments.create({ amount: 1 }));
    expect(app.control.runs).toBe(calls.length);
    expect(new Set(first.map((r) => JSON.stringify(r))).size).toBe(calls.length);
    for (const [i, [key, user]] of calls.entries()) {
      expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual(first[i]);
    }
    expect(app.control.runs).toBe(calls.length);
  });

  it('stores quotes, backslashes, NUL escapes and emoji in scope, key and response byte-exactly', async () => {
    const app = makeDialectApp(backend, { cache: false });
    const key = `q'uo\\te"s-\\'--`;
    const text = `it's a \\ back'slash \u0000 nul, "quotes", emoji 😀, X'00' and $$`;
    app.control.result = () => ({ text });
    const user = `o'brien\\ 😀`;
    expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual({ text });
    expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual({ text });
    expect(app.control.runs).toBe(1);
    const rows = await backend.query<{ scope: unknown; key: unknown }>(
      `SELECT scope, ${name === 'mariadb' ? '`key`' : 'key'} AS "key" FROM idempotency_keys WHERE scope = ${backend.text(`user:${user}`)}`.replace(
        'AS "key"',
        name === 'mariadb' ? 'AS `key`' : 'AS "key"',
      ),
    );
    expect(rows.map((r) => [str(r.scope), str(r.key)])).toEqual([[`user:${user}`, key]]);
  });

  it('refuses a scope with NUL or a lone surrogate as a 400 whose message names no other database', async () => {
    const app = makeDialectApp(backend);
    for (const [id, problem] of [
      ['a\u0000b', /NUL character at index 6/],
      ['t:\uD800', /lone surrogate U\+D800 at index 7/],
    ] as const) {
      const error = await failure(app.caller(newKey(), id).payments.create({ amount: 1 }));
      expect(error.code).toBe('BAD_REQUEST');
      expect(error.message).toMatch(problem);
      // The scope is refused on every dialect alike; the message may name Postgres only where it is Postgres.
      if (name === 'mariadb' || name === 'sqlite' || name === 'libsql') expect(error.message).not.toMatch(/postgres/i);
    }
    expect(app.control.runs).toBe(0);
  });

  it('answers 422 payload_mismatch for the same key with another input or procedure', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    await app.caller(key, 'mm').payments.create({ amount: 1 });
    await expectReason(
      app.caller(key, 'mm').payments.create({ amount: 2 }),
      'payload_mismatch',
      'UNPROCESSABLE_CONTENT',
    );
    const other = makeDialectApp(backend, { cache: false });
    await expectReason(other.caller(key, 'mm').payments.refund({ amount: 1 }), 'payload_mismatch');
    expect(other.control.runs).toBe(0);
  });

  it('answers 409 in_progress at once with wait 0 while the original runs, then replays it', async () => {
    const app = makeDialectApp(backend, { wait: 0 });
    const key = newKey();
    const gate = deferred();
    app.control.gate = gate.promise;
    const original = app.caller(key, 'busy').payments.create({ amount: 9 });
    await until(() => app.control.runs === 1);
    await expectReason(app.caller(key, 'busy').payments.create({ amount: 9 }), 'in_progress', 'CONFLICT');
    gate.resolve();
    const result = await original;
    expect(await app.caller(key, 'busy').payments.create({ amount: 9 })).toEqual(result);
  });

  it.skipIf(!several)(
    'makes a duplicate on another instance wait for the original and replay it; with wait 0 it answers 409',
    async () => {
      const a = makeDialectApp(backend);
      const key = newKey();
      const gate = deferred();
      a.control.gate = gate.promise;
      const original = a.caller(key, 'wait').payments.create({ amount: 9 });
      await until(() => a.control.runs === 1);
      const impatient = makeDialectApp(backend.another(), { wait: 0 });
      await expectReason(impatient.caller(key, 'wait').payments.create({ amount: 9 }), 'in_progress');
      const patient = makeDialectApp(backend.another(), { wait: 20_000 });
      const blocked = patient.caller(key, 'wait').payments.create({ amount: 9 });
      await sleep(300);
      gate.resolve();
      const result = await original;
      expect(await blocked).toEqual(result);
      expect(patient.control.runs + impatient.control.runs).toBe(0);
      expect(await paymentsOf('wait')).toEqual([9]);
    },
  );

  it('stores a deterministic error without the handler writes and replays it', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    expect((await failure(app.caller(key, 'declined').payments.create({ amount: 4 }))).code).toBe('PAYMENT_REQUIRED');
    const fresh = makeDialectApp(backend, { cache: false });
    const replayed = await failure(fresh.caller(key, 'declined').payments.create({ amount: 4 }));
    expect([replayed.code, replayed.message]).toEqual(['PAYMENT_REQUIRED', 'card declined']);
    expect(fresh.control.runs).toBe(0);
    expect(await paymentsOf('declined')).toEqual([]);
  });

  it('rolls back a 5xx, releases the key, and the retry runs once', async () => {
    const app = makeDialectApp(backend);
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'boom' });
    await failure(app.caller(key, 'fail5xx').payments.create({ amount: 3 }));
    await expect.poll(() => keyRow(key)).toBeUndefined();
    app.control.throwAfterWrite = undefined;
    await app.caller(key, 'fail5xx').payments.create({ amount: 3 });
    await app.caller(key, 'fail5xx').payments.create({ amount: 3 });
    expect(app.control.runs).toBe(2);
    expect(await paymentsOf('fail5xx')).toEqual([3]);
  });

  it('runs an expired key again, taking its row over', async () => {
    const app = makeDialectApp(backend, { ttl: 100, cache: false });
    const key = newKey();
    await app.caller(key, 'ttl').payments.create({ amount: 1 });
    await sleep(200);
    await app.caller(key, 'ttl').payments.create({ amount: 2 });
    expect(app.control.runs).toBe(2);
    expect(await paymentsOf('ttl')).toEqual([1, 2]);
  });

  for (const mode of ['transaction', 'lease'] as const) {
    it(`${mode} mode: counts ttl from the claim, and from the completion only for a handler that outlived it`, async () => {
      const keptMs = async (key: string) => {
        const k = name === 'mariadb' ? '`key`' : 'key';
        const span =
          backend.dialect === 'postgres'
            ? 'extract(epoch from (expires_at - created_at)) * 1000'
            : 'expires_at - created_at';
        const [row] = await backend.query<{ ms: unknown }>(
          `SELECT ${span} AS ms FROM idempotency_keys WHERE ${k} = ${backend.text(key)} AND status = 'done'`,
        );
        return Number(row?.ms);
      };
      const long = makeDialectApp(backend, { mode, ttl: 3_600_000, cache: false });
      long.control.delayMs = 400;
      const claimKey = newKey();
      await long.caller(claimKey, `claim-ttl-${mode}`).payments.create({ amount: 1 });
      // created_at and expires_at are the claim's clock; from the completion it would be the handler's 400 ms later.
      expect((await keptMs(claimKey)) - 3_600_000).toBeLessThan(200);
      const short = makeDialectApp(backend, { mode, ttl: 300, cache: false });
      short.control.delayMs = 600;
      const shortKey = newKey();
      await short.caller(shortKey, `short-ttl-${mode}`).payments.create({ amount: 1 });
      // The handler outlived the ttl: its result is kept a full ttl from the completion, past the claim's 300 ms.
      expect(await keptMs(shortKey)).toBeGreaterThanOrEqual(900);
    });
  }

  it('fails with response_too_large, rolls back and frees the key', async () => {
    const app = makeDialectApp(backend, { maxResponseBytes: 64 });
    const key = newKey();
    app.control.result = () => 'y'.repeat(100);
    await expectReason(app.caller(key, 'big').payments.create({ amount: 1 }), 'response_too_large');
    expect(await keyRow(key)).toBeUndefined();
    expect(await paymentsOf('big')).toEqual([]);
  });

  it('lease mode: runs once, commits the writes with the result, replays it', async () => {
    const app = makeDialectApp(backend, { mode: 'lease' });
    const key = newKey();
    const first = await app.caller(key, 'lease-once').payments.create({ amount: 10 });
    const fresh = makeDialectApp(backend, { mode: 'lease', cache: false });
    expect(await fresh.caller(key, 'lease-once').payments.create({ amount: 10 })).toEqual(first);
    expect(app.control.runs + fresh.control.runs).toBe(1);
    expect(await paymentsOf('lease-once')).toEqual([10]);
  });

  it('lease mode: takes over a claim whose holder died, tells the handler, and refuses another payload on it', async () => {
    const app = makeDialectApp(backend, { mode: 'lease' });
    const key = newKey();
    const fp = await fingerprint('payments.create', { amount: 8 });
    await insertRow({
      scope: 'user:lease-dead',
      key,
      fingerprint: fp,
      status: 'in_progress',
      token: 'dead',
      lockedInMs: -1000,
      expiresInMs: 3_600_000,
    });
    await expectReason(app.caller(key, 'lease-dead').payments.create({ amount: 7 }), 'payload_mismatch');
    expect(await app.caller(key, 'lease-dead').payments.create({ amount: 8 })).toMatchObject({ amount: 8 });
    expect(app.control.takeovers).toEqual([true]);
    expect((await keyRow(key))?.status).toBe('done');
  });

  it('lease mode: rolls back a 5xx, frees the key, stores a deterministic error', async () => {
    const app = makeDialectApp(backend, { mode: 'lease' });
    const key = newKey();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'BAD_GATEWAY', message: 'provider down' });
    await failure(app.caller(key, 'lease-5xx').payments.create({ amount: 3 }));
    expect(await keyRow(key)).toBeUndefined();
    app.control.throwAfterWrite = () => new TRPCError({ code: 'FORBIDDEN', message: 'no' });
    await failure(app.caller(key, 'lease-5xx').payments.create({ amount: 3 }));
    const fresh = makeDialectApp(backend, { mode: 'lease', cache: false });
    const replayed = await failure(fresh.caller(key, 'lease-5xx').payments.create({ amount: 3 }));
    expect([replayed.code, replayed.message]).toEqual(['FORBIDDEN', 'no']);
    expect(await paymentsOf('lease-5xx')).toEqual([]);
  });

  // On SQLite the running holder's transaction holds the write lock: nobody can take its claim over while it lives.
  it.skipIf(!several || name === 'sqlite' || name === 'libsql')(
    'lease mode: fences off a stale owner, whose late completion neither commits nor overwrites',
    async () => {
      const stale = makeDialectApp(backend, { mode: 'lease' });
      const fresh = makeDialectApp(backend.another(), { mode: 'lease' });
      const key = newKey();
      const gate = deferred();
      stale.control.gate = gate.promise;
      const staleCall = stale.caller(key, 'lease-stale').payments.create({ amount: 4 });
      await until(() => stale.control.atGate === 1);
      const k = name === 'mariadb' ? '`key`' : 'key';
      // A live holder is never taken over (its transaction holds the key's advisory lock on Postgres, its connection
      // the key's named lock on MySQL): its connection must die first, as when its server crashes.
      if (backend.dialect === 'postgres') {
        await backend.query(`SELECT pg_terminate_backend(pid) FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`);
      } else {
        const lock = new MysqlStatements(parseTableName('idempotency_keys'), { mariadb: true }).leaseLockName({
          scope: 'user:lease-stale',
          key,
        });
        const [holder] = await backend.query<{ id: unknown }>(`SELECT IS_USED_LOCK(${lock}) AS id`);
        expect(holder?.id).not.toBeNull();
        await backend.query(`KILL ${Number(holder?.id)}`);
      }
      await backend.query(
        `UPDATE idempotency_keys SET locked_until = ${backend.at(-1000)} WHERE ${k} = ${backend.text(key)}`,
      );
      const freshResult = await fresh.caller(key, 'lease-stale').payments.create({ amount: 4 });
      expect(fresh.control.takeovers).toEqual([true]);
      gate.resolve();
      await expectReason(staleCall, 'in_progress', 'CONFLICT');
      expect(await paymentsOf('lease-stale')).toEqual([4]);
      expect(JSON.parse(String((await keyRow(key))?.response)).data).toEqual(freshResult);
    },
  );

  it('runs a storm of 200 concurrent duplicates exactly once, and all 200 get the same answer', async () => {
    const apps = several ? [makeDialectApp(backend), makeDialectApp(backend.another())] : [makeDialectApp(backend)];
    const key = newKey();
    const gate = deferred();
    for (const app of apps) {
      app.control.gate = gate.promise;
      app.control.delayMs = 20;
    }
    const calls = Array.from({ length: 200 }, (_, i) =>
      apps[i % apps.length]!.caller(key, 'storm').payments.create({ amount: 5 }),
    );
    await sleep(100);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(apps.reduce((n, a) => n + a.control.runs, 0)).toBe(1);
    expect(results).toHaveLength(200);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await paymentsOf('storm')).toEqual([5]);
  });
});
