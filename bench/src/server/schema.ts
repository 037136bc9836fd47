import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export const ACCOUNTS = 1000;

/** Business tables (shared by all contenders) and the classic pattern's key table. */
export async function createBenchSchema(db: Kysely<any>): Promise<void> {
  await sql`CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, balance bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE IF NOT EXISTS payments (
    id bigserial PRIMARY KEY, account_id int NOT NULL, amount int NOT NULL, ref text,
    created_at timestamptz NOT NULL DEFAULT now())`.execute(db);
  await sql`INSERT INTO accounts (id, balance) SELECT g, 1000000000 FROM generate_series(1, ${ACCOUNTS}) g
    ON CONFLICT (id) DO NOTHING`.execute(db);
  await sql`CREATE TABLE IF NOT EXISTS classic_keys (
    key text PRIMARY KEY, fingerprint text NOT NULL, status text NOT NULL, response text,
    created_at timestamptz NOT NULL DEFAULT now())`.execute(db);
}
