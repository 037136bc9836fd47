import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../index.js';
import { makeDialectApp } from './dialect-app.js';
import {
  columnText,
  DIALECT_BACKENDS,
  type DialectBackend,
  insertKeyRows,
  type KeyRow,
  openDialectBackend,
} from './dialect-backends.js';
import { expectReason } from './expectations.js';
import { deferred } from './harness.js';

/** The columns of the key table, in order, and the definitions of its indexes, as each dialect lists them. */
const catalog = {
  postgres: {
    columns: `SELECT column_name AS c FROM information_schema.columns WHERE table_name = 'idempotency_keys'
      ORDER BY ordinal_position`,
    indexes: `SELECT indexdef AS d FROM pg_indexes WHERE tablename = 'idempotency_keys'`,
  },
  mysql: {
    columns: `SELECT column_name AS c FROM information_schema.columns
      WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys' ORDER BY ordinal_position`,
    indexes: `SELECT CONCAT(index_name, ' (', column_name, ')') AS d FROM information_schema.statistics
      WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys'`,
  },
  sqlite: {
    columns: `SELECT name AS c FROM pragma_table_info('idempotency_keys') ORDER BY cid`,
    indexes: `SELECT sql AS d FROM sqlite_master
      WHERE type = 'index' AND tbl_name = 'idempotency_keys' AND sql IS NOT NULL`,
  },
} as const;

describe.each(DIALECT_BACKENDS)('storage on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
  });
  afterAll(() => backend?.close());
  /** Another "server instance" on the same database: PGlite has none. */
  const several = name !== 'pglite';

  it('migrates idempotently, also when five instances run migrate() at once', async () => {
    const instances = Array.from({ length: 5 }, () => makeDialectApp(several ? backend.another() : backend));
    await Promise.all(instances.map((i) => i.idempotency.migrate()));
    await instances[0]!.idempotency.migrate();
    const { columns, indexes } = catalog[backend.dialect];
    expect((await backend.query<{ c: unknown }>(columns)).map((r) => columnText(r.c))).toEqual([
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
      'steps',
    ]);
    const definitions = (await backend.query<{ d: unknown }>(indexes)).map((r) => columnText(r.d));
    expect(definitions.join('\n')).toMatch(/\(expires_at\)/);
    expect(await instances[1]!.caller('mig-key', 'mig').payments.create({ amount: 1 })).toMatchObject({ amount: 1 });
  });

  /** Attaches a new SQLite database file as `schema` on the backend's connection; `detach` undoes it. */
  const attach = async (schema: string) => {
    const dir = await mkdtemp(join(tmpdir(), 'trpc-idem-attached-'));
    await backend.query(`ATTACH DATABASE ${backend.text(join(dir, 'attached.db'))} AS "${schema}"`);
    return {
      detach: async () => {
        // Cleanup only: a connection that lost the attachment (what a test may be about) has nothing to detach.
        await backend.query(`DETACH DATABASE "${schema}"`).catch(() => {});
        await rm(dir, { recursive: true, force: true });
      },
    };
  };

  /**
   * The qualified, mixed-case names the README's `table` option allows, and how to read each back: a Postgres
   * schema (migrate() creates it), a MySQL database (migrate() creates it; named afresh, as databases are
   * server-wide), on SQLite `main` and an attached database (which the app attaches).
   */
  const qualifiedTables = async (): Promise<{ table: string; quoted: string; cleanup?: () => Promise<void> }[]> => {
    if (backend.dialect === 'postgres') return [{ table: 'Idem_Schema.Keys', quoted: '"Idem_Schema"."Keys"' }];
    if (backend.dialect === 'mysql') {
      const database = `Idem_${randomBytes(4).toString('hex')}`;
      return [
        {
          table: `${database}.Keys`,
          quoted: `\`${database}\`.\`Keys\``,
          cleanup: async () => {
            await backend.query(`DROP DATABASE IF EXISTS \`${database}\``);
          },
        },
      ];
    }
    return [
      { table: 'main.Idem_Keys', quoted: '"main"."Idem_Keys"' },
      { table: 'Idem_Schema.Keys', quoted: '"Idem_Schema"."Keys"', cleanup: (await attach('Idem_Schema')).detach },
    ];
  };

  it('works with a schema-qualified, mixed-case table name', async () => {
    for (const { table, quoted, cleanup } of await qualifiedTables()) {
      try {
        const app = makeDialectApp(backend, { table, cache: false });
        await app.idempotency.migrate();
        await app.idempotency.migrate();
        const first = await app.caller('schema-key', 'schema').payments.create({ amount: 1 });
        expect(await app.caller('schema-key', 'schema').payments.create({ amount: 1 })).toEqual(first);
        expect(app.control.runs).toBe(1);
        const rows = await backend.query<{ status: unknown }>(`SELECT status FROM ${quoted}`);
        expect(rows.map((r) => columnText(r.status))).toEqual(['done']);
      } finally {
        await cleanup?.();
      }
    }
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', table: 'a.b.c' })).toThrow(/table/);
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', table: 'x"; drop table y' })).toThrow(/table/);
    // A name too long for Postgres says so (the outside review found a message that only named the characters).
    expect(() => createIdempotency({ db: backend.db, scope: () => 's', table: `t${'x'.repeat(63)}` })).toThrow(/1–63/);
  });

  // SQLite attaches a database to one connection (a Postgres schema or MySQL database belongs to the server): a
  // connection the store replaces must not lose it.
  it.skipIf(name !== 'sqlite' && name !== 'libsql')(
    "keeps a table on an attached database usable after a claim met another connection's write lock",
    async () => {
      const { detach } = await attach('Idem_Attached');
      try {
        const app = makeDialectApp(backend, { table: 'Idem_Attached.Keys', wait: 0 });
        await app.idempotency.migrate();
        const locked = deferred();
        const done = deferred();
        const holder = backend
          .another()
          .db.connection()
          .execute(async (c) => {
            await sql`BEGIN IMMEDIATE`.execute(c);
            locked.resolve();
            await done.promise;
            await sql`ROLLBACK`.execute(c);
          });
        await locked.promise;
        // The claim meets SQLITE_BUSY until its wait is used up (`wait: 0`: the 50 ms floor).
        await expectReason(app.caller('busy-key', 'attached').payments.create({ amount: 1 }), 'in_progress');
        done.resolve();
        await holder;
        const first = await app.caller('busy-key', 'attached').payments.create({ amount: 1 });
        expect(await app.caller('busy-key', 'attached').payments.create({ amount: 1 })).toEqual(first);
        expect(app.control.runs).toBe(1);
      } finally {
        await detach();
      }
    },
  );

  it('stores quotes, backslashes and unicode in scope, key and response byte-exactly', async () => {
    const app = makeDialectApp(backend, { table: 'escape_keys', cache: false });
    await app.idempotency.migrate();
    const key = `q'uo\\te"s-\\'--`;
    const text = `it's a \\ back'slash \u0000 nul, "quotes", emoji 😀, E'' and $$`;
    app.control.result = () => ({ text });
    const user = `o'brien\\`;
    const first = await app.caller(key, user).payments.create({ amount: 1 });
    expect(first).toEqual({ text });
    expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual({ text });
    expect(app.control.runs).toBe(1);
    const rows = await backend.query<{ scope: unknown; k: unknown }>(
      `SELECT scope, ${backend.keyColumn} AS k FROM escape_keys`,
    );
    expect(rows.map((r) => ({ scope: columnText(r.scope), key: columnText(r.k) }))).toEqual([
      { scope: `user:${user}`, key },
    ]);
  });

  /** `n` expired results of one scope in the key table `table`. */
  const expiredRows = (n: number): KeyRow[] =>
    Array.from({ length: n }, (_, i) => ({
      scope: 's',
      key: `expired-${i + 1}`,
      status: 'done',
      expiresInMs: -60_000,
    }));

  it('purges only expired rows, never a live lease, in bounded batches', async () => {
    const app = makeDialectApp(backend, { table: 'purge_keys' });
    await app.idempotency.migrate();
    await insertKeyRows(
      backend,
      [
        ...expiredRows(25),
        { scope: 's', key: 'fresh', status: 'done', expiresInMs: 3_600_000 },
        {
          scope: 's',
          key: 'live-lease',
          status: 'in_progress',
          token: 't',
          lockedInMs: 3_600_000,
          expiresInMs: -60_000,
        },
        {
          scope: 's',
          key: 'dead-lease',
          status: 'in_progress',
          token: 't',
          lockedInMs: -3_600_000,
          expiresInMs: -60_000,
        },
      ],
      'purge_keys',
    );
    expect(await app.idempotency.purgeExpired({ batchSize: 10, maxBatches: 2 })).toBe(20);
    expect(await app.idempotency.purgeExpired({ batchSize: 10 })).toBe(6);
    expect(await app.idempotency.purgeExpired()).toBe(0);
    const k = backend.keyColumn;
    const left = await backend.query<{ k: unknown }>(`SELECT ${k} AS k FROM purge_keys ORDER BY ${k}`);
    expect(left.map((r) => columnText(r.k))).toEqual(['fresh', 'live-lease']);
  });

  it.skipIf(!several)('lets concurrent purges split the work without deleting a row twice', async () => {
    const app = makeDialectApp(backend, { table: 'purge_many' });
    await app.idempotency.migrate();
    await insertKeyRows(backend, expiredRows(500), 'purge_many');
    const others = Array.from({ length: 4 }, () => {
      const other = backend.another();
      return createIdempotency({ db: other.db, pool: other.pool, scope: () => 's', table: 'purge_many' });
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
    const app = makeDialectApp(backend, { table: 'never_migrated' });
    await expect(app.caller('m-key', 'nomigrate').payments.create({ amount: 1 })).rejects.toThrow(/migrate\(\)/);
    expect(app.control.runs).toBe(0);
  });
});
