/**
 * One contender's HTTP server, run as a child process so the load generator never shares its event loop.
 * Config arrives as JSON in BENCH_SERVER_CONFIG; the port goes back over IPC. The parent can ask for the
 * number of SQL round trips (every pg Client.query), Redis commands sent and CPU time used so far.
 */
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { ServerConfig } from '../contenders/contender-spec.ts';
import { RedisCounter } from '../contenders/redis-counter.ts';
import { countStatements } from '../load/count-statements.ts';
import { openDialectDb } from '../scenarios/dialects.ts';
import { buildDialectRouter, buildRouter } from './router.ts';
import { backendName } from './spawn-server.ts';

const config = JSON.parse(process.env.BENCH_SERVER_CONFIG ?? '{}') as ServerConfig;

let queries = 0;
let statements = 0;
const originalQuery = pg.Client.prototype.query;
// BENCH_LOG_SQL=n prints the first n statements each server sends (to see what one request costs Postgres).
let logSql = Number(process.env.BENCH_LOG_SQL ?? 0);
pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
  queries++;
  const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string })?.text;
  statements += text ? countStatements(text) : 1;
  if (logSql > 0) {
    logSql--;
    console.error(`[${config.spec.name}] ${text}`);
  }
  return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
} as typeof pg.Client.prototype.query;

// Idle connections close after 2 s: nine servers x 16 connections would pass max_connections (100) if the servers
// rotated out of the load kept theirs; the warm-up of each cell reopens what the measured part needs.
// application_name lets the ledger find this server's Postgres backends (their CPU, from /proc).
const pool = new pg.Pool({
  connectionString: config.databaseUrl,
  max: config.poolMax,
  idleTimeoutMillis: 2000,
  application_name: backendName(config.spec.name),
});
pool.on('error', () => {});
const redis = new RedisCounter();
// A dialect server (the dialects scenario over HTTP) leaves the pg pool unused: it connects on first use only.
const db = config.dialect
  ? await openDialectDb(config.dialect, config.poolMax)
  : new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
const router = config.dialect
  ? await buildDialectRouter(config, config.dialect, db)
  : await buildRouter(config, db, pool, redis);

// Unexpected server errors (5xx) are printed once per distinct message: a benchmark must say why requests failed.
const seen = new Set<string>();
const server = createHTTPServer({
  router,
  createContext: ({ req, res }) => ({ req, res }),
  onError: ({ error }) => {
    if (error.code !== 'INTERNAL_SERVER_ERROR' && error.code !== 'SERVICE_UNAVAILABLE') return;
    const message = `${error.message} ${error.cause instanceof Error ? error.cause.message : ''}`;
    if (seen.has(message) || seen.size >= 5) return;
    seen.add(message);
    console.error(`[${config.spec.name}] ${error.code}: ${message}`);
  },
});
server.keepAliveTimeout = 60_000;

// Inside a range, a random port, and another on EADDRINUSE: the range lies in the OS's ephemeral ports, so an
// outgoing connection (anyone's) can hold any one of them.
const pickPort = () => {
  const range = config.portRange;
  return range ? range[0] + Math.floor(Math.random() * (range[1] - range[0] + 1)) : 0;
};
let attempts = 0;
server.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EADDRINUSE' || !config.portRange || ++attempts > 50) throw error;
  server.listen({ port: pickPort(), host: '127.0.0.1', backlog: 4096 });
});
server.on('listening', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.send?.({ type: 'ready', port });
});
server.listen({ port: pickPort(), host: '127.0.0.1', backlog: 4096 });

process.on('message', (message: { type: string }) => {
  if (message.type === 'counters') {
    const cpu = process.cpuUsage();
    process.send?.({ type: 'counters', queries, statements, redis: redis.commands, cpuMicros: cpu.user + cpu.system });
  }

  if (message.type === 'stop') {
    server.close();
    void db.destroy().finally(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
