import { type Kysely, MysqlAdapter, PostgresAdapter, SqliteAdapter } from 'kysely';
import type { DialectName } from './dialect.js';

const BY_ADAPTER: [new () => object, DialectName][] = [
  [PostgresAdapter, 'postgres'],
  [MysqlAdapter, 'mysql'],
  [SqliteAdapter, 'sqlite'],
];

/** What an adapter supports (every Kysely adapter answers these). */
interface AdapterTraits {
  supportsReturning?: unknown;
  supportsTransactionalDdl?: unknown;
  supportsOutput?: unknown;
}

/**
 * The dialect of `db`, from its adapter: Kysely's own dialects and those that reuse its adapters (PGlite, libSQL,
 * PlanetScale, …) are recognised; `named` (the `dialect` option) wins, for a third-party adapter.
 *
 * By class first. A bundler may rename the classes (a minified production build) or bundle a second copy of
 * kysely, and then neither `instanceof` nor the class name answers: what the adapter supports still tells
 * Kysely's three apart (Postgres: RETURNING and transactional DDL; MySQL: neither; SQLite: RETURNING only;
 * MSSQL, which has OUTPUT instead, is not ours).
 */
export function detectDialect(db: Kysely<any>, named: DialectName | undefined): DialectName {
  if (named) return named;
  const adapter = db.getExecutor().adapter as object & AdapterTraits;
  for (const [type, name] of BY_ADAPTER) {
    if (adapter instanceof type || adapter.constructor?.name === type.name) return name;
  }
  const { supportsReturning: returning, supportsTransactionalDdl: ddl, supportsOutput: output } = adapter;
  if (output !== true) {
    if (returning === true && ddl === true) return 'postgres';
    if (returning === false && ddl === false) return 'mysql';
    if (returning === true && ddl === false) return 'sqlite';
  }
  throw new TypeError(
    `createIdempotency: cannot tell the SQL dialect of \`db\` (adapter ${adapter.constructor?.name ?? 'unknown'}): ` +
      `pass \`dialect: 'postgres' | 'mysql' | 'sqlite'\``,
  );
}
