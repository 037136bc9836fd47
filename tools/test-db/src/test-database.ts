import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

/** A database of its own for one test file, so files run in parallel without sharing tables. */
export interface TestDatabase {
  /** Connection string of the new database. */
  url: string;
  /** A Kysely on a `pg` pool of that database; destroyed by `drop()`. */
  db: Kysely<any>;
  /** A raw `pg` pool on the same database, for assertions that bypass Kysely. */
  pool: pg.Pool;
  /** Opens another Kysely on this database (another "server instance"); destroyed by `drop()`. */
  connect(opts?: { max?: number }): Kysely<any>;
  /** Closes every connection and drops the database. */
  drop(): Promise<void>;
}

/**
 * Creates a fresh database on the test server and connects to it.
 * `adminUrl` comes from `inject('pgAdminUrl')` inside vitest, or from `resolveTestServer()` outside it.
 */
export async function createTestDatabase(adminUrl: string, opts: { max?: number } = {}): Promise<TestDatabase> {
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const dbUrl = url.toString();
  const opened: Kysely<any>[] = [];
  const pools: pg.Pool[] = [];
  const connect = (o: { max?: number } = {}) => {
    const pool = new pg.Pool({ connectionString: dbUrl, max: o.max ?? 20 });
    pool.on('error', () => {}); // a terminated backend must not crash the test process
    pools.push(pool);
    const k = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    opened.push(k);
    return k;
  };
  const db = connect(opts);
  const pool = new pg.Pool({ connectionString: dbUrl, max: 4 });
  pool.on('error', () => {});
  pools.push(pool);
  return {
    url: dbUrl,
    db,
    pool,
    connect,
    async drop() {
      await Promise.allSettled(opened.map((k) => k.destroy()));
      await Promise.allSettled(pools.map((p) => p.end()));
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
