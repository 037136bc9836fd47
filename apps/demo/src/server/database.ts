import path from 'node:path';
import { Kysely, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DemoDatabase } from './schema';

/** Where the demo's data lives: a real Postgres server when `DATABASE_URL` is set, else PGlite in a local folder. */
export interface DemoDatabaseHandle {
  db: Kysely<DemoDatabase>;
  kind: 'pglite' | 'postgres';
  /** The raw pool behind `db` (Postgres only), handed to the middleware for its faster path. */
  pool?: pg.Pool;
  /** Human-readable location, shown on the page. */
  location: string;
}

/** PGlite's data folder: `DEMO_DATA_DIR`, default `apps/demo/.data` (the demo's scripts run from apps/demo). */
export function pgliteDataDir(): string {
  // Chosen at run time: keep the bundler from tracing the whole project because of it.
  return path.resolve(/*turbopackIgnore: true*/ process.env.DEMO_DATA_DIR ?? path.join(process.cwd(), '.data'));
}

/**
 * Builds the Kysely instance without connecting: PGlite is only opened by the first query and `pg` connects
 * lazily, so importing this module during `next build` never touches the data folder (which is not safe to
 * open from several processes at once).
 */
export function createDemoDatabase(databaseUrl = process.env.DATABASE_URL): DemoDatabaseHandle {
  if (databaseUrl) {
    // A Pool connects on its first query, not here.
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
    return {
      db: new Kysely<DemoDatabase>({ dialect: new PostgresDialect({ pool }) }),
      kind: 'postgres',
      pool,
      location: redactPassword(databaseUrl),
    };
  }
  const dataDir = pgliteDataDir();
  return {
    db: new Kysely<DemoDatabase>({
      dialect: new PGliteDialect({
        pglite: async () => {
          const { mkdir } = await import('node:fs/promises');
          const { PGlite } = await import('@electric-sql/pglite');
          await mkdir(dataDir, { recursive: true });
          console.log(`[demo] opening PGlite in ${dataDir}`);
          return PGlite.create(dataDir);
        },
      }),
    }),
    kind: 'pglite',
    location: dataDir,
  };
}

function redactPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres';
  }
}
