import { PGlite } from '@electric-sql/pglite';
import { createMariaDbDatabase, createSqliteFile, createTestDatabase } from '@trpc-idempotency/test-db';
import { Kysely, PGliteDialect } from 'kysely';
import type { Pool } from 'pg';
import { createLedger } from './payments-app.ts';
import type { SqlFamily } from './sql-family.ts';

/**
 * Every way the middleware reaches a database, as the suites parameterize over them: Postgres through the raw
 * `pg` pool (the fast path) and through Kysely only (the general path), PGlite in process, MariaDB (mysql2),
 * SQLite (better-sqlite3) and libSQL on a local file.
 */
export const BACKENDS = ['pg-pool', 'pg-kysely', 'pglite', 'mariadb', 'sqlite', 'libsql'] as const;
export type BackendName = (typeof BACKENDS)[number];
/** The backends a separate server process can share with others (PGlite lives inside one process). */
export const PROCESS_BACKENDS = ['pg-pool', 'pg-kysely', 'mariadb', 'sqlite', 'libsql'] as const;
export type ProcessBackendName = (typeof PROCESS_BACKENDS)[number];
/** The non-Postgres dialects. */
export const DIALECTS = ['mariadb', 'sqlite', 'libsql'] as const;
export type DialectName = (typeof DIALECTS)[number];

/** A database of one backend for one test file, with the ledger created. */
export interface Backend {
  name: BackendName;
  family: SqlFamily;
  /** The Kysely the test's server and checks use. */
  db: Kysely<any>;
  /** The raw pool to hand the middleware: set on `pg-pool` only. */
  pool?: Pool;
  /** What a test server's middleware gets: the Kysely, and on `pg-pool` the raw pool (its fast path). */
  via: { db: Kysely<any>; pool?: Pool };
  /** Where a child server process connects: a postgres:// or mysql:// URL, or a SQLite file path (not PGlite). */
  target?: string;
  /** Another Kysely on the same database (another server instance in this process); PGlite gives the same one. */
  connect(): Kysely<any>;
  drop(): Promise<void>;
}

/** Opens a fresh database of `name` (Postgres: `pgAdminUrl` from `inject`), ledger included. */
export async function openBackend(name: BackendName, pgAdminUrl?: string): Promise<Backend> {
  let backend: Omit<Backend, 'via'>;
  if (name === 'pg-pool' || name === 'pg-kysely') {
    if (!pgAdminUrl) throw new Error(`openBackend(${name}) needs the Postgres admin URL`);
    // Small pools: Postgres here has 100 connections shared by every test file running at the same time.
    const t = await createTestDatabase(pgAdminUrl, { max: 6 });
    backend = {
      name,
      family: 'postgres',
      db: t.db,
      ...(name === 'pg-pool' ? { pool: t.pool } : {}),
      target: t.url,
      connect: () => t.connect({ max: 4 }),
      drop: () => t.drop(),
    };
  } else if (name === 'pglite') {
    const db = new Kysely<any>({ dialect: new PGliteDialect({ pglite: new PGlite() }) });
    backend = { name, family: 'postgres', db, connect: () => db, drop: () => db.destroy() };
  } else if (name === 'mariadb') {
    const m = await createMariaDbDatabase({ max: 6 });
    backend = {
      name,
      family: 'mysql',
      db: m.db,
      target: m.url,
      connect: () => m.connect({ max: 4 }),
      drop: () => m.drop(),
    };
  } else {
    const file = await createSqliteFile();
    const open = () => (name === 'sqlite' ? file.betterSqlite() : file.libsql());
    backend = { name, family: 'sqlite', db: open(), target: file.path, connect: open, drop: () => file.drop() };
  }
  await createLedger(backend.db);
  return { ...backend, via: { db: backend.db, ...(backend.pool ? { pool: backend.pool } : {}) } };
}

/** The child server's DIALECT for a backend that runs in a separate process. */
export function processDialect(name: ProcessBackendName): 'postgres' | DialectName {
  return name === 'pg-pool' || name === 'pg-kysely' ? 'postgres' : name;
}

/** MySQL returns VARBINARY columns as bytes: the stored text, decoded. */
const text = (v: unknown): string => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));

/** Rows of the key table, selected by key (and scope), with their text columns read back on any dialect. */
export async function keyRows(
  db: Kysely<any>,
  where: { key?: string; scope?: string } = {},
  table = 'idempotency_keys',
): Promise<{ scope: string; key: string; status: string }[]> {
  let query = db.selectFrom(table).select(['scope', 'key', 'status']);
  if (where.key !== undefined) query = query.where('key', '=', where.key);
  if (where.scope !== undefined) query = query.where('scope', '=', where.scope);
  const rows = await query.execute();
  return rows.map((r) => ({ scope: text(r.scope), key: text(r.key), status: text(r.status) }));
}

/** How many rows a table holds (a `where ref = …` on the ledger when `ref` is given). */
export async function countRows(db: Kysely<any>, table: string, ref?: string): Promise<number> {
  let query = db.selectFrom(table).select((eb) => eb.fn.countAll().as('n'));
  if (ref !== undefined) query = query.where('ref', '=', ref);
  const row = await query.executeTakeFirst();
  return Number(row?.n ?? -1);
}
