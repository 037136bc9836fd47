import { MysqlStatements } from '../store/dialects/mysql/mysql-statements.js';
import { isSqliteBusy } from '../store/dialects/sqlite/sqlite-errors.js';
import { parseTableName } from '../store/table-name.js';
import type { DialectBackend } from './dialect-backends.js';
import { killLeaseHolders } from './harness.js';

/** MySQL hands binary columns back as bytes. */
export const str = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v);

/** The `key` column in SQL text: a reserved word on MySQL. */
export const keyColumn = (backend: DialectBackend) => (backend.dialect === 'mysql' ? '`key`' : 'key');

/** The amounts of a user's payments, in the order they were written. */
export async function paymentsOf(backend: DialectBackend, userId: string): Promise<number[]> {
  const rows = await backend.query<{ amount: unknown }>(
    `SELECT amount FROM payments WHERE user_id = ${backend.text(userId)} ORDER BY id`,
  );
  return rows.map((r) => Number(r.amount));
}

/** The stored row of a key (of any scope), as text; `undefined` when there is none. */
export async function keyRow(backend: DialectBackend, key: string) {
  const rows = await backend.query<Record<string, unknown>>(
    `SELECT status, token, response FROM idempotency_keys WHERE ${keyColumn(backend)} = ${backend.text(key)}`,
  );
  return rows.map((r) => ({ status: str(r.status), token: str(r.token), response: str(r.response) }))[0] as
    | { status: string; token: string | null; response: string | null }
    | undefined;
}

/** Writes a row by hand, times relative to the database clock (a claim left by a holder that died, say). */
export async function insertKeyRow(
  backend: DialectBackend,
  row: { scope: string; key: string; fingerprint: string; status: string; token?: string; lockedInMs?: number },
) {
  const t = backend.text;
  await backend.query(`INSERT INTO idempotency_keys
      (scope, ${keyColumn(backend)}, fingerprint, path, status, token, locked_until, created_at, expires_at)
    VALUES (${t(row.scope)}, ${t(row.key)}, ${t(row.fingerprint)}, 'payments.create', ${t(row.status)},
      ${row.token ? t(row.token) : 'NULL'}, ${row.lockedInMs === undefined ? 'NULL' : backend.at(row.lockedInMs)},
      ${backend.at(0)}, ${backend.at(3_600_000)})`);
}

/**
 * A live lease holder "dies": its connection ends, as when its server crashes, and with it the lock that kept its
 * claim from a takeover (Postgres: the advisory lock of its handler's transaction; MySQL: the key's named lock).
 * Returns how many connections were ended.
 */
export async function killLeaseHolder(backend: DialectBackend, owner: { scope: string; key: string }) {
  if (backend.dialect === 'postgres') return killLeaseHolders(backend);
  if (backend.dialect !== 'mysql') throw new Error('a SQLite holder cannot be killed apart from its process');
  const lock = new MysqlStatements(parseTableName('idempotency_keys'), { mariadb: true }).leaseLockName(owner);
  const [holder] = await backend.query<{ id: unknown }>(`SELECT IS_USED_LOCK(${lock}) AS id`);
  if (holder?.id == null) return 0;
  await backend.query(`KILL ${Number(holder.id)}`);
  return 1;
}

/**
 * Another server instance, watched:
 * - `seenWaiting()`: a call has been seen waiting for a lock another connection holds — a lock waiter on Postgres and
 *   MariaDB (lockWaiters(), database-wide: a test has one waiter at a time); on SQLite one of this instance's tries
 *   of BEGIN IMMEDIATE that found the write lock held (such a waiter retries in its own process, invisible to every
 *   other connection);
 * - `statements()`: how many of its statements on the keys table have completed (its claims and reads of rows).
 */
export function watchedInstance(backend: DialectBackend) {
  let busyTries = 0;
  let statements = 0;
  const onKeys = (text: string) => text.includes('idempotency_keys');
  const instance = backend.another({
    log: (e) => {
      if (e.level === 'query' && onKeys(e.query.sql)) statements++;
      if (e.level === 'error' && e.query.sql === 'BEGIN IMMEDIATE' && isSqliteBusy(e.error)) busyTries++;
    },
  });
  // The pg fast path runs its statements on clients of `pool`, past Kysely's log.
  instance.pool?.on('connect', (client) => {
    const query = client.query.bind(client) as (text: unknown) => Promise<unknown>;
    client.query = ((text: unknown, ...rest: unknown[]) => {
      const sent = (query as (...args: unknown[]) => Promise<unknown>)(text, ...rest);
      if (typeof text === 'string' && onKeys(text) && sent instanceof Promise)
        void sent.then(
          () => statements++,
          () => {},
        );
      return sent;
    }) as typeof client.query;
  });
  const seenWaiting = async () =>
    backend.dialect === 'sqlite' ? busyTries > 0 : ((await backend.lockWaiters()) ?? 0) > 0;
  return { ...instance, seenWaiting, statements: () => statements };
}
