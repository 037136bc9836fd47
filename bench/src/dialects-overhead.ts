/**
 * The dialects scenario on its own, printed (docs/benchmarks.md gets it from the full `npm run bench`):
 * `npm run bench:dialects -w @trpc-idempotency/bench` with Postgres at DATABASE_URL and MariaDB at MYSQL_URL;
 * SQLite and libSQL on temporary WAL files. CALLS and ROUNDS set the size.
 */
import { loadavg } from 'node:os';
import { dialectSetups, dialectsScenario } from './scenarios/dialects.ts';
import { setupDatabase } from './setup-database.ts';

const log = (line: string) => console.log(line);
const { tdb, stopServer } = await setupDatabase();
try {
  const rows = await dialectsScenario({
    calls: Number(process.env.CALLS ?? 500),
    rounds: Number(process.env.ROUNDS ?? 3),
    setups: await dialectSetups(tdb.url),
    log,
  });
  log(
    `${rows.length} cells; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
} finally {
  await tdb.drop();
  await stopServer();
}
