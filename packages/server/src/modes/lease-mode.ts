import type { Call, MiddlewareResultLike, NextFn, Runtime } from '../middleware/call.js';
import {
  callNext,
  claimFailure,
  completionFailure,
  conflict,
  event,
  executed,
  handlerContext,
  mismatch,
  replayRow,
  responseTooLarge,
  responseToStore,
} from '../middleware/outcomes.js';
import { oversizedBytes } from '../middleware/response-limit.js';
import type { LeaseOwner, Row, Session, Statement, Statements, Store } from '../store/dialects/dialect.js';
import { traced } from '../telemetry/call-trace.js';
import { SPAN } from '../telemetry/names.js';
import { LeaseRenewer } from './lease-renewer.js';
import { LeaseSteps } from './steps.js';

/** First and largest pause between two looks at an in-flight original's row. */
const POLL_FIRST_MS = 20;
const POLL_MAX_MS = 250;

/**
 * Lease mode: the claim commits first (in_progress, a lease, a fencing token); the handler's transaction takes the
 * key's advisory lock and holds it while the handler runs, so the claim is taken over only once its lease ran out
 * AND that lock is free (the holder's connection is gone), however starved its renewals (lease-renewer.ts) are.
 * The handler's writes commit with the stored result only while the token still owns the row; a holder that learns
 * it was taken over is told (its signal) and fenced off.
 * A duplicate polls until `wait`, then 409; so does a claim taken over before its handler ran (it never ran).
 */
export async function runLeaseMode(rt: Runtime, call: Call, next: NextFn): Promise<MiddlewareResultLike> {
  try {
    // First call only: learn whether the database is PGlite. Unreachable here means unreachable at the claim.
    await rt.store.ready();
  } catch (error) {
    throw claimFailure(rt, call, error);
  }
  let pause = POLL_FIRST_MS;
  let waited = false;
  // A call that owned the key but lost it before its handler ran waits again: one `waited` event per call.
  let reportedWait = false;
  for (;;) {
    let claim: Awaited<ReturnType<typeof claimKey>>;
    try {
      claim = await traced(call.trace, SPAN.claim, () => claimKey(rt, call));
    } catch (error) {
      throw claimFailure(rt, call, error);
    }
    if (claim.owner) {
      if (waited && !reportedWait) event(rt, call, 'waited');
      reportedWait ||= waited;
      if (claim.owner.takeover) event(rt, call, 'taken_over');
      const outcome = await runOwned(rt, call, next, claim.owner, claim.session);
      if (outcome !== NOT_RUN) return outcome;
      // Taken over before its handler ran: nothing of this call happened, so it is a duplicate now, and waits for the
      // new owner's outcome within what is left of `wait` (or claims the key again if that owner lets it go).
      waited = true;
      continue;
    }
    const existing = claim.existing;
    if (existing) {
      if (existing.fingerprint !== call.fingerprint || existing.path !== call.path) throw mismatch(rt, call);
      if (existing.status === 'done' && typeof existing.response === 'string') {
        if (waited && !reportedWait) event(rt, call, 'waited');
        return replayRow(rt, call, existing.response, claim.readAt + Number(existing.expires_in_ms));
      }
    }
    // The original still holds a live lease, a takeover was lost (or its row just vanished): look again until `wait`
    // is used up.
    const left = call.deadline - performance.now();
    if (left <= 0) throw conflict(rt, call);
    // Wake when the lease runs out; past it (a live holder keeps its lock), at the polling pace.
    const leaseLeft = existing ? Number(existing.lease_left_ms) : 0;
    call.trace?.polling();
    await sleep(Math.min(pause, left, leaseLeft > 0 ? leaseLeft + 1 : existing || claim.lostTakeover ? pause : 1));
    pause = Math.min(pause * 2, POLL_MAX_MS);
    waited = true;
  }
}

interface Owner {
  token: string;
  takeover: boolean;
  /** Fast path: the handler's transaction already holds the key's lock (true), or found the key taken over (false). */
  locked?: boolean;
  /** performance.now() before the claim (or takeover) was sent: the row's `ttl` counts from the claim. */
  sentAt: number;
}

/**
 * One look at the key: claims it (on the fast path the claim commits and the handler's transaction opens in one
 * round trip); if it is taken, reads the row and takes it over when it expired or its holder's lease ran out.
 */
async function claimKey(
  rt: Runtime,
  call: Call,
): Promise<
  | { owner: Owner; session: Session | undefined; existing?: undefined }
  | { owner?: undefined; existing?: Row; lostTakeover?: true; readAt: number }
> {
  const { store, sql, options } = rt;
  const lease = { ...call, ttlMs: options.ttl, token: globalThis.crypto.randomUUID(), leaseMs: options.lease };
  // On the fast path a claim commits and opens the handler's transaction in one round trip; on MySQL on one
  // connection, which holds the key's lease lock from the claim on. When it lost, that transaction serves to read the
  // row and is rolled back (on the fast path in the same round trip).
  const tryClaim = async (
    statement: Statement,
  ): Promise<{ row: Row | undefined; session?: Session; locked?: boolean }> => {
    if (!store.commitsThenBegins) return { row: (await store.autocommit([statement]))[0]?.[0] };
    const { session, rows } = await store.commitThenBegin(statement, sql.holdLease(lease));
    return { row: rows[0]?.[0], session, locked: (rows[2]?.length ?? 0) > 0 };
  };
  const read = async (session: Session | undefined) =>
    (session ? await session.finish([sql.select(call)]) : await store.autocommit([sql.select(call)]))[0]?.[0];
  const owner = (takeover: boolean, locked: boolean | undefined, sentAt: number) => ({
    token: lease.token,
    takeover,
    locked,
    sentAt,
  });
  const claimSentAt = performance.now();
  const claimed = await tryClaim(sql.claimLease(lease));
  if (claimed.row) return { owner: owner(false, claimed.locked, claimSentAt), session: claimed.session };
  // The row's expiry is read relative to the database's clock and counted on ours from before the read.
  const readAt = performance.now();
  const existing = await read(claimed.session);
  if (!existing || !(existing.free === true || deadLease(existing, call))) return { existing, readAt };
  const takeOverSentAt = performance.now();
  const taken = await tryClaim(sql.takeOverLease(lease));
  if (taken.row) {
    return { owner: owner(existing.status === 'in_progress', taken.locked, takeOverSentAt), session: taken.session };
  }
  // Another call took it over first, or the holder is alive (its lock is held though its lease ran out): look again.
  // What was read is stale: an expired result is no longer the key's outcome, nor its payload the key's.
  taken.session?.rollback().catch(() => {});
  return { lostTakeover: true, readAt };
}

/**
 * A claim of this payload whose lease ran out: its holder may have died. Only a try: `takeOverLease` takes it over
 * only if the holder's advisory lock is free too (its connection is gone).
 */
function deadLease(row: Row, call: Call): boolean {
  return (
    row.status === 'in_progress' &&
    row.token != null &&
    Number(row.lease_left_ms) === 0 &&
    row.fingerprint === call.fingerprint &&
    row.path === call.path
  );
}

/** runOwned's answer when the claim was taken over before its handler ran: the caller waits as a duplicate. */
const NOT_RUN = Symbol('not run');

async function runOwned(
  rt: Runtime,
  call: Call,
  next: NextFn,
  claim: Owner,
  opened: Session | undefined,
): Promise<MiddlewareResultLike | typeof NOT_RUN> {
  const { store, sql, options } = rt;
  const owner = { scope: call.scope, key: call.key, token: claim.token };
  // On one connection (PGlite) nobody else can take the claim over while this process lives: no renewal.
  const held = store.singleConnection ? undefined : rt.leases?.hold(owner);
  try {
    let session: Session;
    let locked = claim.locked;
    try {
      if (opened) session = opened;
      else {
        const begun = await store.begin(sql.holdLease(owner));
        session = begun.session;
        locked = (begun.rows[1]?.length ?? 0) > 0;
      }
    } catch (error) {
      await store.autocommit([sql.releaseLease(owner)]).catch(() => {});
      throw claimFailure(rt, call, error);
    }
    // The lease ran out before the handler's transaction held the key's lock (no connection for that long), and
    // another call took the key over (on MySQL, or the lock stayed busy): this one's handler never ran, so the call
    // waits like a duplicate for the key's outcome. Its claim, should the token still own it, is let go first.
    if (!locked) {
      await session.rollback([sql.releaseLease(owner)]).catch(() => {});
      return NOT_RUN;
    }
    if (held) held.locked = true;
    const steps = new LeaseSteps(rt, call, owner, session, claim.takeover, held);
    const context = handlerContext(rt, call, session, claim.takeover, held?.signal, steps);
    const result = await callNext(next, context, call.trace);
    // The handler is done: renewals stop. One still in flight could otherwise come back after our completion
    // committed (the row no longer in_progress) and abort the signal of a call that succeeded. Nothing can take the
    // key over meanwhile: until our transaction ends, its lock (advisory, named or SQLite's write lock) keeps it, and
    // the completion is fenced by the token.
    if (held) rt.leases?.settle(held);
    const current = steps.session;
    if (!current) return await lostInStep(rt, call, owner, steps, result);
    session = current;
    let response: string | undefined;
    try {
      response = responseToStore(rt, result);
    } catch (error) {
      // The app's storeErrors or serializer threw: nothing is stored, the claim must not outlive the call.
      if (!(await rollbackAndFree(rt, session, owner, steps))) throw conflict(rt, call);
      event(rt, call, 'released', error);
      throw completionFailure(rt, error);
    }
    if (response === undefined) {
      if (!(await rollbackAndFree(rt, session, owner, steps))) throw conflict(rt, call);
      event(rt, call, 'released', result.ok ? undefined : result.error);
      return result;
    }
    // A holder that learnt it lost the key answers 409 whatever it returned: the new owner's outcome is the key's.
    if (held?.lost) return await fencedOff(rt, call, session, owner, steps);
    const bytes = oversizedBytes(rt, response);
    if (bytes !== undefined) {
      await session.rollback([release(rt, owner, steps)]).catch(() => {});
      throw responseTooLarge(rt, call, bytes, result.ok ? undefined : result.error);
    }
    if (!result.ok) {
      // The handler's writes roll back; the deterministic error is stored if this owner still holds the key.
      let stored: boolean;
      try {
        const store = () => session.rollback([sql.storeErrorFenced(owner, response, options.ttl)]);
        stored = ((await traced(call.trace, SPAN.complete, store))[0]?.length ?? 0) > 0;
      } catch (error) {
        // Not stored (the connection died?): free the claim; if it is gone, a takeover owns the key and answers.
        if (!(await freed(rt, owner, steps))) throw conflict(rt, call);
        event(rt, call, 'released', error);
        return result;
      }
      // A takeover owns the key now: as on the success path, the new owner's outcome is the key's, not ours.
      if (!stored) throw conflict(rt, call);
      return executed(rt, call, result);
    }
    // The row expires `ttl` after its claim (or, had the handler outlived `ttl`, after the completion): the cache
    // keeps the result no longer than from before the claim, so never past the row (an outlived ttl is not cached).
    const expiresAt = claim.sentAt + options.ttl;
    try {
      await traced(call.trace, SPAN.complete, () => session.commit([sql.completeFenced(owner, response, options.ttl)]));
    } catch (error) {
      if (rt.errors.isFencedOff(error)) {
        // A takeover owns the key now: this owner's writes were rolled back; the new owner's result will answer.
        held?.lose('another call took the key over');
        throw conflict(rt, call);
      }
      // Not committed (the connection died?): free the claim; if it is gone, a takeover owns the key and answers.
      if (!(await freed(rt, owner, steps))) {
        held?.lose('another call took the key over');
        throw conflict(rt, call);
      }
      event(rt, call, 'released', error);
      throw completionFailure(rt, error);
    }
    if (expiresAt > performance.now())
      rt.cache?.set(call.scope, call.key, { fingerprint: call.fingerprint, response, expiresAt });
    return executed(rt, call, result);
  } finally {
    if (held) rt.leases?.drop(held);
  }
}

/**
 * The holder learnt it may have lost its lease (its signal aborted): nothing of it is stored. Its writes roll
 * back, its claim is freed if it still has it, and it answers 409 `in_progress` — whoever owns the key now answers.
 */
async function fencedOff(
  rt: Runtime,
  call: Call,
  session: Session,
  owner: LeaseOwner,
  steps: LeaseSteps,
): Promise<never> {
  await session.rollback([release(rt, owner, steps)]).catch(() => {});
  throw conflict(rt, call);
}

/**
 * A step could not open the handler's transaction again: another call took the key over (its outcome answers), or
 * the database failed (the claim is freed, its recorded steps kept, and the call fails so that a retry goes on).
 */
async function lostInStep(
  rt: Runtime,
  call: Call,
  owner: LeaseOwner,
  steps: LeaseSteps,
  result: MiddlewareResultLike,
): Promise<MiddlewareResultLike> {
  if (!(await freed(rt, owner, steps))) throw conflict(rt, call);
  event(rt, call, 'released', result.ok ? undefined : result.error);
  if (!result.ok) return result;
  throw completionFailure(rt, new Error("the handler's transaction could not be opened again after a step"));
}

/**
 * Frees the owner's claim: deletes the row, or, once steps were recorded on it, ends its lease instead (the steps
 * stay for the retry that takes the key over; a deleted row would make it run them again).
 */
function release(rt: Runtime, owner: LeaseOwner, steps: LeaseSteps | undefined): Statement {
  return steps?.recorded ? rt.stepSql.lapse(owner) : rt.sql.releaseLease(owner);
}

/**
 * Rolls the handler's writes back and frees the claim. False when its connection was lost and another call took the
 * key over meanwhile: the handler's failure is then not the key's outcome, the new owner's is.
 */
async function rollbackAndFree(rt: Runtime, session: Session, owner: LeaseOwner, steps: LeaseSteps): Promise<boolean> {
  try {
    await session.rollback([release(rt, owner, steps)]);
    return true;
  } catch {
    return freed(rt, owner, steps);
  }
}

/** Frees the claim if `owner` still holds it; false when another call took it over (unreachable: true). */
async function freed(rt: Runtime, owner: LeaseOwner, steps?: LeaseSteps): Promise<boolean> {
  try {
    // Our claim deleted, the row is gone (or, with recorded steps, still carries our token); else it is another call's.
    const rows = await rt.store.autocommit([release(rt, owner, steps), rt.sql.select(owner)]);
    const row = rows[1]?.[0];
    return row === undefined || (steps?.recorded === true && String(row.token) === owner.token);
  } catch {
    return true;
  }
}

/** Renews the leases of one middleware instance, through the store's renewal connection. */
export function createLeaseRenewer(store: Store, sql: Statements, leaseMs: number): LeaseRenewer {
  return new LeaseRenewer(
    leaseMs,
    async (owners) => (await store.renew(sql.renewLeases(owners, leaseMs))).map((row) => String(row.token)),
    { warm: () => store.warmRenewals(), idle: () => store.renewalsIdle() },
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
