import { randomBytes } from 'node:crypto';
import { Kysely, type KyselyConfig, MysqlDialect } from 'kysely';
import { createPool, type Pool } from 'mysql2';

/** The MariaDB / MySQL server the tests use: `MYSQL_URL`, else the local MariaDB (root, no password). */
export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** A MySQL database of its own for one test file, like `createTestDatabase` does on Postgres. */
export interface MariaDbDatabase {
  /** Connection string of the new database. */
  url: string;
  /** A Kysely on a mysql2 pool of that database; destroyed by `drop()`. */
  db: Kysely<any>;
  /**
   * Opens another Kysely on this database (another "server instance"); destroyed by `drop()`. `log`: Kysely's, to
   * watch that instance's statements.
   */
  connect(opts?: { max?: number } & Pick<KyselyConfig, 'log'>): Kysely<any>;
  /** A new Kysely dialect on this database, for a test that wraps it (its Kysely is the caller's to destroy). */
  dialect(opts?: { max?: number }): MysqlDialect;
  /** Closes every connection and drops the database. */
  drop(): Promise<void>;
}

function pool(url: string, max: number): Pool {
  const p = createPool({ uri: url, connectionLimit: max });
  p.on('connection', (c) => c.on('error', () => {}));
  return p;
}

export async function createMariaDbDatabase(opts: { max?: number } = {}): Promise<MariaDbDatabase> {
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = pool(MYSQL_URL, 1);
  try {
    await admin.promise().query(`CREATE DATABASE \`${name}\``);
  } finally {
    await admin.promise().end();
  }
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const dbUrl = url.toString();
  const opened: Kysely<any>[] = [];
  const connect = (o: { max?: number } & Pick<KyselyConfig, 'log'> = {}) => {
    const k = new Kysely<any>({ log: o.log, dialect: new MysqlDialect({ pool: pool(dbUrl, o.max ?? 10) }) });
    opened.push(k);
    return k;
  };
  return {
    url: dbUrl,
    db: connect(opts),
    connect,
    dialect: (o = {}) => new MysqlDialect({ pool: pool(dbUrl, o.max ?? 10) }),
    async drop() {
      await Promise.allSettled(opened.map((k) => k.destroy()));
      const c = pool(MYSQL_URL, 1);
      try {
        await c.promise().query(`DROP DATABASE IF EXISTS \`${name}\``);
      } finally {
        await c.promise().end();
      }
    },
  };
}
