/**
 * The dialects scenario on its own, printed (docs/benchmarks.md gets it from the full `npm run bench`):
 * `npm run bench:dialects -w @trpc-idempotency/bench` with Postgres at DATABASE_URL and MariaDB at MYSQL_URL;
 * SQLite and libSQL on temporary WAL files. CALLS and ROUNDS set the size; HTTP=1 adds the cells over HTTP
 * (child servers, CONNECTIONS, DURATION ms, `--load raw|undici`).
 */
import { loadavg } from 'node:os';
import { paramsFromArgs } from './bench-env.ts';
import { closeLoadPools, useLoadGenerator } from './load/http-load.ts';
import { dialectSetups, dialectsScenario } from './scenarios/dialects.ts';
import { setupDatabase } from './setup-database.ts';

const log = (line: string) => console.log(line);
const params = paramsFromArgs(process.argv.slice(2));
useLoadGenerator(params.load);
const rounds = Number(process.env.ROUNDS ?? 3);
const { tdb, stopServer } = await setupDatabase();
try {
  const rows = await dialectsScenario({
    calls: Number(process.env.CALLS ?? 500),
    rounds,
    setups: await dialectSetups(tdb.url),
    log,
    ...(process.env.HTTP
      ? {
          http: {
            databaseUrl: tdb.url,
            redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
            connections: Number(process.env.CONNECTIONS ?? 16),
            durationMs: Number(process.env.DURATION ?? 2000),
            warmupMs: 400,
            rounds,
          },
        }
      : {}),
  });
  log(
    `${rows.length} cells; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
} finally {
  await closeLoadPools();
  await tdb.drop();
  await stopServer();
}
