import { type Kysely, MysqlAdapter, PostgresAdapter, SqliteAdapter } from 'kysely';
import type { DialectName } from './dialect.js';

const BY_ADAPTER: [new () => object, DialectName][] = [
  [PostgresAdapter, 'postgres'],
  [MysqlAdapter, 'mysql'],
  [SqliteAdapter, 'sqlite'],
];

/**
 * The dialect of `db`, from its adapter: Kysely's own dialects and those that reuse its adapters (PGlite, libSQL,
 * PlanetScale, …) are recognised; `named` (the `dialect` option) wins, for a third-party adapter.
 */
export function detectDialect(db: Kysely<any>, named: DialectName | undefined): DialectName {
  if (named) return named;
  const adapter = db.getExecutor().adapter as object;
  for (const [type, name] of BY_ADAPTER) {
    // By name too: a second copy of kysely in node_modules has classes of its own.
    if (adapter instanceof type || adapter.constructor?.name === type.name) return name;
  }
  throw new TypeError(
    `createIdempotency: cannot tell the SQL dialect of \`db\` (adapter ${adapter.constructor?.name ?? 'unknown'}): pass \`dialect: 'postgres' | 'mysql' | 'sqlite'\``,
  );
}
