import type { Call, MiddlewareResultLike, NextFn, Runtime } from '../middleware/call.js';
import {
  callNext,
  claimFailure,
  claimLostFailure,
  completionFailure,
  conflict,
  event,
  executed,
  handlerContext,
  lostCompletionFailure,
  mismatch,
  replayRow,
  responseTooLarge,
  responseToStore,
} from '../middleware/outcomes.js';
import { oversizedBytes } from '../middleware/response-limit.js';
import type { Row, Session, Statement } from '../store/dialects/dialect.js';
import { traced } from '../telemetry/call-trace.js';
import { SPAN } from '../telemetry/names.js';
import { endedTransactionFailure, lostClaimFailure } from './ended-transaction.js';

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
  let takeOver = false;
  for (let attempt = 1; ; attempt++) {
    let claim: Awaited<ReturnType<typeof claimKey>>;
    try {
      claim = await traced(call.trace, SPAN.claim, () => claimKey(rt, call, takeOver));
    } catch (error) {
      // The connection had lost the claim's prepared statement, or a pooler put one behind it that another client
      // prepared: the claim failed before anything ran, and the store sends plain texts now. Claim again.
      if (rt.errors.isPreparedStatementMismatch?.(error) && attempt < MAX_CLAIM_ATTEMPTS) continue;
      throw claimFailure(rt, call, error);
    }
    if (claim.session) return await runOwned(rt, call, next, claim);
    const row = claim.existing;
    // An expired row is taken over next; a row that vanished (purged, rolled back) is claimed again.
    takeOver = row?.free === true;
    if (!row || takeOver) {
      if (attempt < MAX_CLAIM_ATTEMPTS) continue;
      throw conflict(rt, call);
    }
    if (row.fingerprint !== call.fingerprint || row.path !== call.path) throw mismatch(rt, call);
    if (row.status === 'done' && typeof row.response === 'string') {
      if (rt.sql.waitedFor?.(row)) event(rt, call, 'waited');
      return replayRow(rt, call, row.response, claim.readAt + Number(row.expires_in_ms));
    }
    // A live lease-mode claim in the same table: nothing to wait on here.
    throw conflict(rt, call);
  }
}

/**
 * Opens the transaction with the claim (or the takeover of an expired row) and, on the fast path and the joined general
 * path, the savepoint, in one round trip. Returns the open session when this call owns the key. Otherwise reads the row
 * — a new statement, so after a wait it sees what the original committed — and rolls back in the same round trip.
 */
async function claimKey(
  rt: Runtime,
  call: Call,
  takeOver: boolean,
): Promise<Owned | { session?: undefined; existing?: Row; readAt: number }> {
  const { store, sql } = rt;
  const values = { ...call, ttlMs: rt.options.ttl };
  // On one connection nothing can hold a lock on our row: no wait to bound. Else what is left of `wait`.
  const waitMs = store.singleConnection ? undefined : Math.max(0, Math.ceil(call.deadline - performance.now()));
  const claim = takeOver ? sql.takeOverTransaction(values, waitMs) : sql.claimTransaction(values, waitMs);
  // The row's expiry counts from the claim by the database's clock: on ours, no earlier than from now.
  const sentAt = performance.now();
  // A prepared claim that ran proves its connection has the prepared completion (see PostgresStatements.complete).
  const prepared = sql.ranPrepared?.(claim) ?? false;
  const joined = store.beginClaim?.([...claim, sql.savepoint()], call);
  if (joined) {
    // The general path on node-postgres: claim and savepoint in one round trip, ownership told by a check.
    const { session, owned } = await joined;
    if (owned) return { session, sentAt, prepared };
    const readAt = performance.now();
    return { existing: (await session.finish([sql.select(call)]))[0]?.[0], readAt };
  }
  const { session, rows } = await store.begin(store.pipelined ? [...claim, sql.savepoint()] : claim);
  const owned = rows[claim.length - 1]?.[0];
  if (owned?.expires_ms == null) {
    // The row's expiry is read relative to the database's clock and counted on ours from before the read.
    const readAt = performance.now();
    return { existing: (await session.finish([sql.select(call)]))[0]?.[0], readAt };
  }
  if (!store.pipelined) {
    try {
      await session.run([sql.savepoint()]);
    } catch (error) {
      await session.rollback().catch(() => {});
      throw error;
    }
  }
  return { session, sentAt, prepared };
}

/** A claim this call owns: its open transaction, when it was sent, and whether it was the prepared claim. */
interface Owned {
  session: Session;
  sentAt: number;
  prepared: boolean;
  existing?: undefined;
}

async function runOwned(rt: Runtime, call: Call, next: NextFn, claim: Owned): Promise<MiddlewareResultLike> {
  const { session } = claim;
  const { sql, options } = rt;
  const result = await callNext(next, handlerContext(rt, call, session, false), call.trace);
  let response: string | undefined;
  try {
    response = responseToStore(rt, result);
  } catch (error) {
    // The app's storeErrors or serializer threw: nothing is stored, the transaction must not outlive the call.
    await session.rollback().catch(() => {});
    event(rt, call, 'released', error);
    throw completionFailure(rt, error);
  }
  if (response === undefined) {
    // An error that is not stored: everything rolls back and the key is free again. The client need not wait for
    // the ROLLBACK.
    session.rollback().catch(() => {});
    event(rt, call, 'released', result.ok ? undefined : result.error);
    return result;
  }
  const bytes = oversizedBytes(rt, response);
  if (bytes !== undefined) {
    await session.rollback().catch(() => {});
    throw responseTooLarge(rt, call, bytes, result.ok ? undefined : result.error);
  }
  // Where the commit's answer carries the completion's row count, nothing is checked on the way (Statements.complete).
  const complete = sql.complete(call, response, options.ttl, claim.prepared, rt.store.commitCounts !== true);
  const statements: Statement[] = result.ok
    ? [sql.releaseSavepoint(), complete]
    : // The deterministic error is stored, the handler's partial writes are not.
      [sql.rollbackToSavepoint(), sql.releaseSavepoint(), complete];
  // The row expires `ttl` after its claim (or, had the handler outlived `ttl`, after the completion): the cache
  // keeps the result no longer than from before the claim, so never past the row (an outlived ttl is not cached).
  const expiresAt = claim.sentAt + options.ttl;
  let changed: number | undefined;
  try {
    changed = await traced(call.trace, SPAN.complete, () => session.commit(statements));
  } catch (error) {
    event(rt, call, 'released', error);
    const ended = await endedTransactionFailure(rt, call, error);
    if (ended) throw ended;
    throw rt.errors.isClaimLost(error)
      ? claimLostFailure(error)
      : rt.errors.isPreparedStatementLost?.(error)
        ? lostCompletionFailure(error)
        : completionFailure(rt, error);
  }
  if (changed === 0) {
    const lost = await lostClaimFailure(rt, call);
    event(rt, call, 'released', lost);
    throw lost;
  }
  if (expiresAt > performance.now())
    rt.cache?.set(call.scope, call.key, { fingerprint: call.fingerprint, response, expiresAt });
  return executed(rt, call, result);
}
