import { performance } from 'node:perf_hooks';
import { type Kysely, sql } from 'kysely';

const CHUNK = 1_000_000;

/**
 * Loads `rows` completed keys into ours' table with INSERT … SELECT generate_series (server-side, no round trip
 * per row): random UUID keys over 1,000 scopes, so the primary-key B-tree grows the way real traffic grows it.
 * `expired` rows are past their expiry (purge fodder); otherwise they live for a day. Returns the load time in ms.
 */
export async function fillTable(db: Kysely<any>, table: string, rows: number, expired: boolean): Promise<number> {
  const started = performance.now();
  const expiry = expired ? sql`now() - interval '1 hour'` : sql`now() + interval '1 day'`;
  for (let from = 1; from <= rows; from += CHUNK) {
    const to = Math.min(rows, from + CHUNK - 1);
    await sql`INSERT INTO ${sql.table(table)} (scope, key, fingerprint, path, status, response, created_at, expires_at)
      SELECT 'fill:' || (g % 1000), gen_random_uuid()::text, md5(g::text) || md5(g::text), 'light', 'done',
        '{"id":' || g || '}', now(), ${expiry}
      FROM generate_series(${from}::int, ${to}::int) g`.execute(db);
  }
  await sql`ANALYZE ${sql.table(table)}`.execute(db);
  return performance.now() - started;
}
