import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { BACKENDS, type Backend, makeApp, openBackend } from './harness.js';

describe.each(BACKENDS)('storage on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
  });
  afterAll(() => backend?.close());

  it('migrates idempotently, also when five instances run migrate() at once', async () => {
    const instances = Array.from({ length: 5 }, () => {
      const other = name === 'pglite' ? backend : backend.another();
      return createIdempotency({ db: other.db, pool: other.pool, scope: () => 's' });
    });
    await Promise.all(instances.map((i) => i.migrate()));
    await instances[0]!.migrate();
    const columns = await backend.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'idempotency_keys' ORDER BY ordinal_position`,
    );
    expect(columns.map((c) => c.column_name)).toEqual([
      'scope',
      'key',
      'fingerprint',
      'path',
      'status',
      'token',
      'locked_until',
      'response',
      'created_at',
      'expires_at',
    ]);
    const indexes = await backend.query<{ indexdef: string }>(
      `SELECT indexdef FROM pg_indexes WHERE tablename = 'idempotency_keys'`,
    );
    expect(indexes.map((i) => i.indexdef).join('\n')).toMatch(/\(expires_at\)/);
  });

  it('works with a schema-qualified, mixed-case table name', async () => {
    const app = makeApp(backend, { table: 'Idem_Schema.Keys' });
    await app.idempotency.migrate();
    await app.caller('schema-key', 'schema').payments.create({ amount: 1 });
    const rows = await backend.query<{ status: string }>(`SELECT status FROM "Idem_Schema"."Keys"`);
    expect(rows).toEqual([{ status: 'done' }]);
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', table: 'a.b.c' })).toThrow(/table/);
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', table: 'x"; drop table y' })).toThrow(/table/);
  });

  it('stores quotes, backslashes and unicode in scope, key and response byte-exactly', async () => {
    const app = makeApp(backend, { table: 'escape_keys', cache: false });
    await app.idempotency.migrate();
    const key = `q'uo\\te"s-\\'--`;
    const text = `it's a \\ back'slash \u0000 nul, "quotes", emoji 😀, E'' and $$`;
    app.control.result = () => ({ text });
    const user = `o'brien\\`;
    const first = await app.caller(key, user).payments.create({ amount: 1 });
    expect(first).toEqual({ text });
    expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual({ text });
    expect(app.control.runs).toBe(1);
    const rows = await backend.query<{ scope: string; key: string }>('SELECT scope, key FROM escape_keys');
    expect(rows).toEqual([{ scope: `user:${user}`, key }]);
  });

  it('purges only expired rows, never a live lease, in bounded batches', async () => {
    const app = makeApp(backend, { table: 'purge_keys' });
    await app.idempotency.migrate();
    await backend.query(`INSERT INTO purge_keys (scope, key, fingerprint, path, status, token, locked_until, expires_at)
      SELECT 's', 'expired-' || i, 'f', 'p', 'done', NULL, NULL, clock_timestamp() - interval '1 minute'
      FROM generate_series(1, 25) i`);
    await backend.query(`INSERT INTO purge_keys (scope, key, fingerprint, path, status, token, locked_until, expires_at) VALUES
      ('s', 'fresh', 'f', 'p', 'done', NULL, NULL, clock_timestamp() + interval '1 hour'),
      ('s', 'live-lease', 'f', 'p', 'in_progress', 't', clock_timestamp() + interval '1 hour', clock_timestamp() - interval '1 minute'),
      ('s', 'dead-lease', 'f', 'p', 'in_progress', 't', clock_timestamp() - interval '1 hour', clock_timestamp() - interval '1 minute')`);
    expect(await app.idempotency.purgeExpired({ batchSize: 10, maxBatches: 2 })).toBe(20);
    expect(await app.idempotency.purgeExpired({ batchSize: 10 })).toBe(6);
    expect(await app.idempotency.purgeExpired()).toBe(0);
    const left = await backend.query<{ key: string }>('SELECT key FROM purge_keys ORDER BY key');
    expect(left.map((r) => r.key)).toEqual(['fresh', 'live-lease']);
  });

  it.skipIf(name === 'pglite')('lets concurrent purges split the work without deleting a row twice', async () => {
    const app = makeApp(backend, { table: 'purge_many' });
    await app.idempotency.migrate();
    await backend.query(`INSERT INTO purge_many (scope, key, fingerprint, path, status, expires_at)
      SELECT 's', 'k' || i, 'f', 'p', 'done', clock_timestamp() - interval '1 minute' FROM generate_series(1, 500) i`);
    const others = Array.from({ length: 4 }, () => {
      const other = backend.another();
      return createIdempotency({ db: other.db, scope: () => 's', table: 'purge_many' });
    });
    const counts = await Promise.all(others.map((o) => o.purgeExpired({ batchSize: 50 })));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(500);
    expect(await backend.query('SELECT 1 FROM purge_many')).toEqual([]);
  });

  it('refuses bad options early, naming the option', () => {
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', wait: -1 })).toThrow(/wait/);
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', ttl: 1.5 })).toThrow(/ttl/);
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', mode: 'x' as never })).toThrow(/mode/);
    expect(() => createIdempotency({ db: {} as never, scope: () => 's' })).toThrow(/db/);
  });

  it('says to run migrate() when the table is missing', async () => {
    const app = makeApp(backend, { table: 'never_migrated' });
    await expect(app.caller('m-key', 'nomigrate').payments.create({ amount: 1 })).rejects.toThrow(/migrate\(\)/);
    expect(app.control.runs).toBe(0);
  });
});
