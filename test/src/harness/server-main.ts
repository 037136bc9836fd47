/**
 * Entry of a payments server run as a child process (transpiled once by server-process.ts, or through `tsx`),
 * so a test can SIGKILL it mid-handler and start it again on the same port. Configured by environment variables
 * (see `ServerProcessOptions` in server-process.ts: DIALECT picks the database); reports to its parent as JSON lines on stdout.
 */
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { createPaymentsApp } from './payments-app.ts';
import { skewClock } from './skewed-clock.ts';

const env = process.env;
const report = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
const num = (value: string | undefined) => (value === undefined || value === '' ? undefined : Number(value));

// Before anything reads the clock: the app's clock disagrees with the database's by this much.
if (num(env.CLOCK_SKEW_MS)) skewClock(Number(env.CLOCK_SKEW_MS));

/** The database: Postgres through `pg` (DATABASE_URL), or DIALECT mariadb (a mysql:// URL), sqlite or libsql (a file). */
async function connect(): Promise<{ db: Kysely<any>; pool?: pg.Pool }> {
  const target = env.DATABASE_URL ?? '';
  const poolMax = num(env.POOL_MAX) ?? 10;
  if (env.DIALECT === 'mariadb') {
    const { createPool } = await import('mysql2');
    const pool = createPool({ uri: target, connectionLimit: poolMax });
    // A killed connection reports on the connection itself; the process must live (as on pg below).
    pool.on('connection', (c) => c.on('error', () => {}));
    return { db: new Kysely<any>({ dialect: new MysqlDialect({ pool }) }) };
  }
  if (env.DIALECT === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    return { db: new Kysely<any>({ dialect: new SqliteDialect({ database: new Database(target) }) }) };
  }
  if (env.DIALECT === 'libsql') {
    const { LibsqlDialect } = await import('@libsql/kysely-libsql');
    return { db: new Kysely<any>({ dialect: new LibsqlDialect({ url: `file:${target}` }) }) };
  }
  const pool = new pg.Pool({
    connectionString: target,
    max: poolMax,
    application_name: env.APP_NAME ?? 'chaos-server',
  });
  // Terminated backends and a stopped Postgres surface here for idle pooled clients; the process must live.
  pool.on('error', () => {});
  if (env.RAW_POOL !== '1') {
    // A client checked out and idle (a transaction open across the handler's non-database work) reports a
    // terminated backend as an 'error' event on the client itself, which crashes Node if nobody listens.
    // Kysely attaches no listener, so an app on the Kysely path must, as here. With the raw pool handed to the
    // middleware (its fast path) we deliberately do not: the middleware holds those clients and must listen.
    pool.on('connect', (client) => client.on('error', () => {}));
  }
  return { db: new Kysely<any>({ dialect: new PostgresDialect({ pool }) }), ...(env.RAW_POOL === '1' ? { pool } : {}) };
}
const { db, pool } = await connect();

const mode = env.MODE === 'lease' ? 'lease' : 'transaction';
const app = createPaymentsApp({
  db,
  ...(pool ? { pool } : {}),
  mode,
  lease: num(env.LEASE_MS),
  wait: num(env.WAIT_MS),
  handlerDelayMs: num(env.HANDLER_DELAY_MS),
  providerUrl: env.PROVIDER_URL,
  instance: env.INSTANCE,
  onEnter: (info) => report({ ev: 'enter', ...info }),
  onLeave: (info) => report({ ev: 'leave', ...info }),
  ttl: num(env.TTL_MS),
  onEvent: (event) => report({ ev: 'idem', event }),
});

await app.idempotency.migrate();

const server = createHTTPServer({ router: app.router, createContext: app.createContext });
if (env.LOG_HITS === '1') {
  server.prependListener('request', (req) => {
    const key = req.headers['idempotency-key'];
    if (typeof key === 'string') report({ ev: 'hit', key });
  });
}
server.listen(num(env.PORT) ?? 0, '127.0.0.1', () => {
  const address = server.address();
  report({ ev: 'listening', port: typeof address === 'object' && address ? address.port : 0 });
});
