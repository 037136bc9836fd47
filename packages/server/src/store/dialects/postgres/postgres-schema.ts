import { int } from '../../sql-int.js';
import type { TableName } from '../../table-name.js';

/** Any advisory lock key works as long as every instance uses the same one; this spells "trpcidem". */
const MIGRATE_LOCK = '7472706369646560';

/**
 * The DDL `migrate()` runs inside one transaction. The advisory lock serialises instances that start at once:
 * concurrent `CREATE TABLE IF NOT EXISTS` can otherwise fail on the catalog's unique index.
 * `response` is text, not jsonb: jsonb would reorder keys and reject `\u0000`, and replays must be byte-exact.
 */
export function migrationStatements(table: TableName): string[] {
  const t = table.qualified;
  return [
    `SELECT pg_advisory_xact_lock(${MIGRATE_LOCK})`,
    ...(table.schema ? [`CREATE SCHEMA IF NOT EXISTS ${table.schema}`] : []),
    `CREATE TABLE IF NOT EXISTS ${t} (
  scope text NOT NULL,
  key text NOT NULL,
  fingerprint text NOT NULL,
  path text NOT NULL,
  status text NOT NULL CHECK (status IN ('in_progress', 'done')),
  token text,
  locked_until timestamptz,
  response text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (scope, key)
)`,
    `CREATE INDEX IF NOT EXISTS ${table.expiryIndexBare} ON ${t} (expires_at)`,
  ];
}

/**
 * One bounded purge batch: expired rows, except claims whose lease is still live (their holder is running).
 * SKIP LOCKED lets several cron runs (or a purge and a claim taking over the same row) proceed without waiting
 * on each other. `ctid` targets the exact row versions selected.
 */
export function purgeBatchStatement(table: TableName, batchSize: number): string {
  const t = table.qualified;
  return `DELETE FROM ${t} WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM ${t}
  WHERE expires_at <= clock_timestamp() AND NOT (status = 'in_progress' AND locked_until > clock_timestamp())
  LIMIT ${int(batchSize)} FOR UPDATE SKIP LOCKED))`;
}
