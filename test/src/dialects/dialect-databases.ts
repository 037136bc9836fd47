import { createMariaDbDatabase, createSqliteFile } from '@trpc-idempotency/test-db';
import { type Kysely, sql } from 'kysely';

/** The non-Postgres dialects the cross-process suites run on (Postgres has its own chaos suites). */
export const DIALECTS = ['mariadb', 'sqlite', 'libsql'] as const;
export type DialectName = (typeof DIALECTS)[number];

/** A database for one test file: where child servers connect, and a Kysely for the test's own checks. */
export interface DialectDatabase {
  name: DialectName;
  /** What the child server connects to: a mysql:// URL or a SQLite file path. */
  target: string;
  db: Kysely<any>;
  drop(): Promise<void>;
}

export async function openDialectDatabase(name: DialectName): Promise<DialectDatabase> {
  if (name === 'mariadb') {
    const m = await createMariaDbDatabase();
    await sql`CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, ref VARCHAR(255) NOT NULL,
      amount INT NOT NULL, user_id VARCHAR(255) NOT NULL, idem_key VARCHAR(255) NOT NULL, instance VARCHAR(64) NOT NULL)`.execute(
      m.db,
    );
    return { name, target: m.url, db: m.db, drop: () => m.drop() };
  }
  const file = await createSqliteFile();
  const db = name === 'sqlite' ? file.betterSqlite() : file.libsql();
  await sql`CREATE TABLE ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, ref TEXT NOT NULL, amount INTEGER NOT NULL,
    user_id TEXT NOT NULL, idem_key TEXT NOT NULL, instance TEXT NOT NULL)`.execute(db);
  return { name, target: file.path, db, drop: () => file.drop() };
}

/** How many ledger rows each ref has, and which refs have more than one (a payment that ran twice). */
export async function ledgerCounts(db: Kysely<any>): Promise<{ rows: number; refs: number; duplicated: string[] }> {
  const rows = await db.selectFrom('ledger').select(['ref']).execute();
  const counts = new Map<string, number>();
  for (const { ref } of rows) counts.set(String(ref), (counts.get(String(ref)) ?? 0) + 1);
  return {
    rows: rows.length,
    refs: counts.size,
    duplicated: [...counts].filter(([, n]) => n > 1).map(([ref]) => ref),
  };
}
