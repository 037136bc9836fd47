import { shouldStoreError } from '../errors/error-policy.js';
import type { Call, MiddlewareResultLike, NextFn, Runtime } from '../middleware/call.js';
import {
  callNext,
  claimFailure,
  completionFailure,
  conflict,
  event,
  mismatch,
  replayRow,
  responseTooLarge,
  utf8Bytes,
} from '../middleware/outcomes.js';
import { encodeStoredResponse } from '../serialize/stored-response.js';
import { createHandlerDb } from '../store/handler-db.js';
import type { Row, Session } from '../store/session.js';

/** A claim that found the key taken by a row that then vanished (purged, rolled back) is retried this often. */
const MAX_CLAIM_ATTEMPTS = 3;

/**
 * Transaction mode: claim, handler and stored result in one READ COMMITTED transaction. A concurrent duplicate's
 * claim blocks on the original's uncommitted row (bounded by `wait` through lock_timeout) and replays once it
 * commits; if the original rolls back, the duplicate's claim goes through and it runs instead.
 */
export async function runTransactionMode(rt: Runtime, call: Call, next: NextFn): Promise<MiddlewareResultLike> {
  try {
    // First call only: learn whether the database is PGlite. Unreachable here means unreachable at the claim.
    await rt.store.ready();
  } catch (error) {
    throw claimFailure(rt, call, error);
  }
  for (let attempt = 1; ; attempt++) {
    let claim: Awaited<ReturnType<typeof claimKey>>;
    try {
      claim = await claimKey(rt, call);
    } catch (error) {
      throw claimFailure(rt, call, error);
    }
    if (claim.session) return await runOwned(rt, call, next, claim.session, claim.expiresAt);
    const row = claim.existing;
    if (!row) {
      if (attempt < MAX_CLAIM_ATTEMPTS) continue;
      throw conflict(rt, call);
    }
    if (row.fingerprint !== call.fingerprint || row.path !== call.path) throw mismatch(rt, call);
    if (row.status === 'done' && typeof row.response === 'string') {
      // Not visible when the claim started, committed before it ended: it blocked on the original.
      if (claim.waited) event(rt, call, 'waited');
      return replayRow(rt, call, row.response, Number(row.expires_ms));
    }
    // A live lease-mode claim in the same table: nothing to wait on here.
    throw conflict(rt, call);
  }
}

/**
 * One round trip on the fast path: BEGIN, bounded claim, the row as it now is, savepoint. Returns the open session
 * when this call owns the key; otherwise rolls back (without making the caller wait) and returns the row.
 */
async function claimKey(
  rt: Runtime,
  call: Call,
): Promise<
  | { session: Session; expiresAt: number; existing?: undefined }
  | { session?: undefined; existing: Row | undefined; waited: boolean }
> {
  const { store, sql } = rt;
  const values = { ...call, ttlMs: rt.options.ttl };
  // On one connection nothing can hold a lock on our row: no timeout to set.
  const locks = !store.singleConnection;
  // What is left of `wait` after any wait in process.
  const waitMs = Math.max(0, Math.ceil(call.deadline - performance.now()));
  const claim = sql.claimTransaction(values, locks ? waitMs : undefined);
  let session: Session;
  let result: Row | undefined;
  let existing: Row | undefined;
  if (store.pipelined) {
    // One round trip: the SELECT is a separate statement so, after a wait, it sees the original's committed row.
    const opened = await store.begin([claim, sql.select(call), sql.savepoint()]);
    session = opened.session;
    result = opened.rows[0]?.[0];
    existing = opened.rows[1]?.[0];
  } else {
    const opened = await store.begin([claim]);
    session = opened.session;
    result = opened.rows[0]?.[0];
    try {
      if (result?.expires_ms != null) await session.run([sql.savepoint()]);
      else existing = (await session.run([sql.select(call)]))[0]?.[0];
    } catch (error) {
      await session.rollback().catch(() => {});
      throw error;
    }
  }
  if (result?.expires_ms != null) return { session, expiresAt: Number(result.expires_ms) };
  session.rollback().catch(() => {});
  return { existing, waited: Number(result?.seen_rows) === 0 };
}

async function runOwned(
  rt: Runtime,
  call: Call,
  next: NextFn,
  session: Session,
  expiresAt: number,
): Promise<MiddlewareResultLike> {
  const { sql, options } = rt;
  const result = await callNext(next, {
    key: call.key,
    scope: call.scope,
    db: createHandlerDb(rt.db, session.executor),
    takeover: false,
  });
  let response: string;
  let statements: string[];
  if (result.ok) {
    try {
      response = encodeStoredResponse({ ok: true, data: result.data }, options.serializer);
    } catch (error) {
      await session.rollback().catch(() => {});
      event(rt, call, 'released', error);
      throw completionFailure(error);
    }
    const bytes = utf8Bytes(response, options.maxResponseBytes);
    if (bytes > options.maxResponseBytes) {
      await session.rollback().catch(() => {});
      throw responseTooLarge(rt, call, bytes);
    }
    statements = [sql.complete(call, response)];
  } else if (shouldStoreError(result.error, options.storeErrors)) {
    response = encodeStoredResponse(
      { ok: false, error: { code: result.error.code, message: result.error.message } },
      options.serializer,
    );
    // The deterministic error is stored, the handler's partial writes are not.
    statements = [sql.rollbackToSavepoint(), sql.complete(call, response)];
  } else {
    // Not stored: everything rolls back and the key is free again. The client need not wait for the ROLLBACK.
    session.rollback().catch(() => {});
    event(rt, call, 'released', result.error);
    return result;
  }
  try {
    await session.commit(statements);
  } catch (error) {
    event(rt, call, 'released', error);
    throw completionFailure(error);
  }
  rt.cache?.set(call.scope, call.key, { fingerprint: call.fingerprint, response, expiresAt });
  event(rt, call, 'executed');
  return result;
}
