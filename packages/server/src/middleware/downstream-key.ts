import { sha256Hex } from '../fingerprint/sha256.js';
import type { TableName } from '../store/table-name.js';

/**
 * Fixed part of what is hashed. Part of the contract: a change would give an in-flight call, retried after a deploy,
 * another downstream key, and the provider would charge it again.
 */
const DOMAIN = 'trpc-idempotency downstream key v1';

/**
 * The key to pass to a provider for one call: the hex SHA-256 of the UTF-8 JSON text of
 * `[DOMAIN, table, scope, key, purpose]`. A caller's key is unique only within its scope, while a provider keys per
 * merchant account; the table tells apart apps that share one. Nothing in it depends on the dialect or the process,
 * so retries and takeovers find the same key.
 */
export function downstreamKey(table: TableName, scope: string, key: string, purpose: string): Promise<string> {
  const { schema, name } = table.parts;
  const text = JSON.stringify([DOMAIN, schema === undefined ? name : `${schema}.${name}`, scope, key, purpose]);
  return sha256Hex(new TextEncoder().encode(text));
}
