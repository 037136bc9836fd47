import { int } from './sql-literal.js';
import type { TableName } from './table-name.js';

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
