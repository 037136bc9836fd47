import type { TRPCError } from '@trpc/server';
import type { Kysely, Transaction } from 'kysely';
import type { ReplayCache } from '../cache/replay-cache.js';
import type { Emit } from '../events.js';
import type { LeaseRenewer } from '../modes/lease-renewer.js';
import type { ResolvedOptions } from '../options.js';
import type { DialectErrors, Statements, StepStatements, Store } from '../store/dialects/dialect.js';
import type { CallTrace } from '../telemetry/call-trace.js';
import type { ScopeStorage } from './call-text.js';

/** What a resolver behind the middleware finds in `ctx.idempotency`. */
export interface IdempotencyContext<DB> {
  /**
   * The call's idempotency key, as the client sent it (or as `fromInput`'s `key` took it from the input). Unique
   * only within its scope: never pass it to a provider, which keys per merchant account; pass `downstreamKey()`.
   */
  key: string;
  /** The call's scope, as `scope` returned it. */
  scope: string;
  /**
   * The transaction whose writes commit atomically with the stored result (both modes). Use it, not the root
   * `db`, for every write of the handler. `.transaction()` on it throws, as on any Kysely `Transaction`.
   */
  db: Transaction<DB>;
  /**
   * The idempotency key to pass downstream (a payment provider's `Idempotency-Key`): 64 lowercase hex characters,
   * a SHA-256 of the table, the scope, the key and `purpose`, so two scopes sending one key never share it. The same
   * on every retry, takeover, process and dialect. `purpose` (default `''`) gives each downstream call of one
   * handler its own key (`'charge'`, `'refund'`). Computed when called: a handler that never asks pays nothing.
   */
  downstreamKey(purpose?: string): Promise<string>;
  /**
   * Lease mode: a durable step. Runs `fn` with the step's own downstream key (`downstreamKey('step:<index>:<name>')`,
   * `index` counting from 0 in call order) and records its result, through the serializer, before it returns. A
   * retry or takeover of the call replays each recorded step's result in order without running it, and runs the
   * first one not recorded with the same key. Call every step before the first use of `db`, one at a time; a step
   * that throws is not recorded; a step whose name differs from the one recorded at its place throws, naming both.
   * In transaction mode it throws: the call's transaction is its only record.
   */
  step<T>(name: string, fn: (stepKey: string) => T | Promise<T>): Promise<T>;
  /** Lease mode: true when this call took over an expired claim whose holder died; the handler runs again. */
  takeover: boolean;
  /**
   * Lease mode: aborted when this call learns another call took its key over (possible only once its connection, and
   * the advisory lock its transaction held, was lost; missed renewals alone never abort it). Stop then, e.g. pass it to
   * `fetch`: the outcome will not be stored and the call answers 409 `in_progress`. Never aborted in transaction mode.
   */
  signal: AbortSignal;
}

/** One idempotent call, as the modes see it. */
export interface Call {
  scope: string;
  key: string;
  path: string;
  fingerprint: string;
  form: 'single' | 'batch';
  /** The key came from the input (`fromInput`'s `key`), not from a header: error messages say so. */
  fromInput: boolean;
  batchIndex: number;
  ctx: unknown;
  /** performance.now() when the middleware started. */
  startedAt: number;
  /** performance.now() after which a duplicate stops waiting for the original. */
  deadline: number;
  /** Its spans and metrics, with the `telemetry` option only. */
  trace?: CallTrace | undefined;
}

/** The middleware's result shape (tRPC checks `ok`, `data` and `error`). */
export type MiddlewareResultLike =
  | { ok: true; data: unknown; marker: never }
  | { ok: false; error: TRPCError; marker: never };

export type NextFn = (opts: { ctx: { idempotency: IdempotencyContext<any> } }) => Promise<MiddlewareResultLike>;

/** Everything the modes share, built once per `createIdempotency`. */
export interface Runtime {
  options: ResolvedOptions<any>;
  db: Kysely<any>;
  store: Store;
  sql: Statements;
  /** Lease mode's durable steps. */
  stepSql: StepStatements;
  /** What the dialect's driver errors mean. */
  errors: DialectErrors;
  /** The dialect's name and longest scope: a scope its table cannot hold is refused with a 400 before the claim. */
  scopeStorage: ScopeStorage;
  cache: ReplayCache | undefined;
  emit: Emit | undefined;
  /** Lease mode: renews this instance's live leases. */
  leases: LeaseRenewer | undefined;
}
