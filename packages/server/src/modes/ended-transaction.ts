import { TRPCError } from '@trpc/server';
import type { Call, Runtime } from '../middleware/call.js';
import { encodeStoredResponse } from '../serialize/stored-response.js';

const ENDED =
  "The handler's own SQL ended the call's transaction (a COMMIT or ROLLBACK through ctx.idempotency.db, " +
  'a procedure, or a statement that commits implicitly), so its writes and the stored result were not ' +
  'committed together. The outcome is unknown: this key will not run again (a retry gets this error, ' +
  'or the result if it was stored); check what the call did, then send a new key';

/**
 * After a transaction-mode completion failed: whether the handler's own SQL had ended the call's transaction. The
 * app's code is trusted (docs/reliability.md, "Trust boundary"), so this is read only on the failure path, from what
 * is there: a claim row committed `in_progress` without a lease token exists only when the handler committed our
 * transaction (a claim commits with its result otherwise). Such a row is marked done with the error returned here,
 * so the key never runs again and every retry learns why. A completion that failed because its savepoint or its
 * transaction was gone (a hidden ROLLBACK, SQLite's COMMIT with nothing open) says the same without a mark: nothing
 * of ours committed, or the result did and a retry replays it. Undefined when neither: the usual failure stands.
 */
export async function endedTransactionFailure(rt: Runtime, call: Call, error: unknown): Promise<TRPCError | undefined> {
  const { store, sql, options } = rt;
  let row: Record<string, unknown> | undefined;
  try {
    row = (await store.autocommit([sql.select(call)]))[0]?.[0];
  } catch {
    return undefined; // The database is unreachable: the failure said so already.
  }
  if (row?.status === 'in_progress' && row.token == null) {
    const outcome = { ok: false as const, error: { code: 'INTERNAL_SERVER_ERROR' as const, message: ENDED } };
    try {
      // In a transaction of ours: MariaDB's completion stores only inside one (see MysqlStatements.complete).
      const { session } = await store.begin([]);
      await session.commit([sql.complete(call, encodeStoredResponse(outcome, options.serializer), options.ttl)]);
    } catch {
      // Unmarked, the row stays in_progress until it expires: retries answer 409, and the key still never runs twice.
    }
    return endedFailure(error);
  }
  return rt.errors.isTransactionGone(error) ? endedFailure(error) : undefined;
}

function endedFailure(cause: unknown): TRPCError {
  return new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: ENDED, cause });
}

const LOST =
  "The key's row was gone when the result was to be stored: the handler deleted or changed its own key's row " +
  "inside its transaction (or app code replaced the middleware's prepared claim), so its writes committed without " +
  'the stored result. The outcome is unknown: this key will not run again (a retry gets this error); check what the ' +
  'call did, then send a new key';

/**
 * After a transaction-mode completion that changed no row had committed (Postgres reads its row count with the
 * COMMIT's answer, see PostgresStatements.complete): the handler deleted or changed its own key's row, and its
 * writes are in.
 * Stores the error returned here on the key, so every retry gets it and the key never runs again (a duplicate that
 * was waiting on the call's row when the handler deleted it, or a database unreachable now, can still run it once
 * more: this is the app's own mistake, caught only where it costs the hot path nothing).
 */
export async function lostClaimFailure(rt: Runtime, call: Call): Promise<TRPCError> {
  const { store, sql, options } = rt;
  const outcome = { ok: false as const, error: { code: 'INTERNAL_SERVER_ERROR' as const, message: LOST } };
  const response = encodeStoredResponse(outcome, options.serializer);
  const stored = sql.storeLostClaim?.({ ...call, ttlMs: options.ttl }, response);
  if (stored) await store.autocommit([stored]).catch(() => {});
  return new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: LOST });
}
