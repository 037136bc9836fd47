import { createSqliteFile, type SqliteFile } from '@trpc-idempotency/test-db';
import Database from 'better-sqlite3';
import { type DialectAdapter, Kysely, SqliteDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../index.js';
import { detectDialect } from './detect-dialect.js';

/**
 * A third-party dialect: SQLite underneath, behind an adapter that is none of Kysely's classes and claims what
 * none of Kysely's SQLite, MySQL or Postgres adapters claims (OUTPUT, like MSSQL's).
 */
function thirdParty(path: string): SqliteDialect {
  const dialect = new SqliteDialect({ database: new Database(path) });
  const foreign = Object.create(null) as DialectAdapter;
  Object.assign(foreign, {
    supportsCreateIfNotExists: true,
    supportsTransactionalDdl: true,
    supportsReturning: false,
    supportsOutput: true,
    supportsMultipleConnections: false,
    acquireMigrationLock: () => Promise.resolve(),
    releaseMigrationLock: () => Promise.resolve(),
  });
  dialect.createAdapter = () => foreign;
  return dialect;
}

describe('the dialect of `db`', () => {
  let file: SqliteFile;
  beforeAll(async () => {
    file = await createSqliteFile();
  });
  afterAll(() => file?.drop());

  it('is learned from the adapter of Kysely own dialects', () => {
    expect(detectDialect(file.betterSqlite(), undefined)).toBe('sqlite');
    expect(detectDialect(file.libsql(), undefined)).toBe('sqlite');
  });

  it('is learned from what the adapter supports when a bundler renamed or duplicated Kysely classes', () => {
    // A production Next.js build minifies class names and may bundle a second copy of kysely: the adapter is then
    // an instance of a class named `n`, not of the PostgresAdapter the server package imports.
    const bundled = (supports: { returning: boolean; transactionalDdl: boolean }) => {
      class n {
        get supportsReturning() {
          return supports.returning;
        }
        get supportsTransactionalDdl() {
          return supports.transactionalDdl;
        }
      }
      return { getExecutor: () => ({ adapter: new n() }) } as unknown as Kysely<any>;
    };
    expect(detectDialect(bundled({ returning: true, transactionalDdl: true }), undefined)).toBe('postgres');
    expect(detectDialect(bundled({ returning: false, transactionalDdl: false }), undefined)).toBe('mysql');
    expect(detectDialect(bundled({ returning: true, transactionalDdl: false }), undefined)).toBe('sqlite');
  });

  it('cannot be learned from a third-party adapter: createIdempotency asks for the `dialect` option', () => {
    const db = new Kysely<any>({ dialect: thirdParty(file.path) });
    expect(() => createIdempotency({ db, scope: () => 's' })).toThrow(/dialect: 'postgres' \| 'mysql' \| 'sqlite'/);
    expect(() => createIdempotency({ db, scope: () => 's', dialect: 'oracle' as never })).toThrow(/`dialect`/);
    void db.destroy();
  });

  it('is taken from the `dialect` option, and the store then works on that dialect', async () => {
    const db = new Kysely<any>({ dialect: thirdParty(file.path) });
    const idem = createIdempotency({ db, scope: () => 's', dialect: 'sqlite', table: 'third_party_keys' });
    await idem.migrate();
    expect(await idem.purgeExpired()).toBe(0);
    await db.destroy();
  });

  it('refuses the pg `pool` fast path on another dialect', () => {
    expect(() =>
      createIdempotency({ db: file.betterSqlite(), scope: () => 's', pool: { connect() {} } as never }),
    ).toThrow(/pool/);
  });
});
