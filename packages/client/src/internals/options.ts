import type { Operation } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { generateKey } from '../generate-key.js';
import { type RetryBudget, type RetryBudgetOptions, retryBudget } from '../retry-budget.js';
import type { IdempotencySettledEvent, MutationPath } from '../types.js';
import type { Jitter } from './backoff.js';
import type { OpenTelemetryApi } from './call-span.js';

/** What `onRetry` gets, just before a retry is sent. */
export interface RetryEvent {
  op: Operation;
  /** The attempt about to be sent: 2 for the first retry. */
  attempt: number;
  /** How long the link waited before it. */
  delayMs: number;
  /** The error of the previous attempt. */
  error: unknown;
  key: string;
}

/** Options of `idempotencyLink`. */
export interface IdempotencyLinkOptions<TRouter extends AnyRouter> {
  /**
   * The mutations that get a key and retries, as dotted paths checked against the router. `'all'` only when
   * every mutation is guarded by the server middleware: a retried unguarded mutation can run twice.
   */
  procedures: readonly MutationPath<TRouter>[] | 'all';
  /**
   * Mutations the server keys from their input (`idempotency.fromInput({ key })`): retried like `procedures`, with
   * the same input, but sent without an `Idempotency-Key` header, which the server would ignore. The link still
   * makes (or takes) a key per call as the call's handle in `onRetry`, `onSettled`, `context.idempotencyInfo` and
   * `pendingCallsLink`'s records; it never leaves the client. Need not be listed in `procedures` too.
   * @default []
   */
  inputKeyed?: readonly MutationPath<TRouter>[];
  /**
   * Total attempts, the first included. With the default backoff, five attempts wait at most 4.5 s in all
   * (2.25 s on average): enough to ride out a dropped connection or a rolling restart.
   * @default 5
   */
  attempts?: number;
  /** Backoff ceiling before the first retry; it doubles for each further retry. @default 300 */
  baseDelayMs?: number;
  /** The most one backoff may wait. @default 10_000 */
  maxDelayMs?: number;
  /**
   * How the backoff is randomised: `'full'` draws in `[0, ceiling)`, which spreads retrying clients best;
   * `'equal'` in `[ceiling/2, ceiling)`; `'decorrelated'` grows from the previous wait; `'none'` waits the ceiling.
   * @default 'full'
   */
  jitter?: Jitter;
  /**
   * Total time for one logical call, in ms. A wait that would end past it is not started: the call fails at
   * once with its last error. Longer than the server's `wait` + `lease` (5 s + 10 s) so a retry can outlive an
   * in-flight original. `Infinity`: no cap (attempts, the budget and the attempt timeout still end the call).
   * @default 30_000
   */
  maxElapsedMs?: number;
  /**
   * Aborts one attempt that got no answer in this many ms; it is then retried with the same key. `Infinity`:
   * an attempt is only cut short by what is left of `maxElapsedMs`.
   * @default 10_000
   */
  attemptTimeoutMs?: number;
  /**
   * The retry budget shared by every call through this link: an object from `retryBudget()`, its options,
   * or `false` to retry without limit. First attempts are never held back.
   * @default retryBudget() — ≤ 10 + 0.5 × answered attempts retries per 10 s
   */
  budget?: RetryBudget | RetryBudgetOptions | false;
  /** Makes a call's key when the caller gave none in `context.idempotencyKey`. @default crypto.randomUUID() */
  generateKey?: () => string;
  /** Called just before each retry is sent. */
  onRetry?: (event: RetryEvent) => void;
  /** Called once per keyed call when it has finished, with its attempts and replay flag. */
  onSettled?: (event: IdempotencySettledEvent) => void;
  /** The random source of the jitter, in [0, 1). @default Math.random */
  random?: () => number;
  /**
   * Whose call this is, pinned when it starts: the signed-in user's id, say (pass `pendingCallsLink`'s `user`).
   * Read again before each retry; when it changed (another user signed in, the session ended), the call sends
   * nothing more and fails with `IdentityChangedError`, its outcome unknown: the HTTP link reads headers on every
   * attempt, so a retry would run this input in the new user's scope.
   * @default undefined — a retry carries whatever headers are current
   */
  identity?: () => unknown;
  /**
   * OpenTelemetry: pass the `@opentelemetry/api` module (its namespace import, `* as otel`) for a span per
   * keyed call, with an event per attempt and the replay flag (docs/telemetry.md). The package never imports it
   * itself: without this option nothing of OpenTelemetry runs or loads.
   * @default undefined
   */
  telemetry?: OpenTelemetryApi;
}

export interface ResolvedOptions {
  isGuarded: (path: string) => boolean;
  /** Whether the server keys this path from its input: no key header then. */
  isInputKeyed: (path: string) => boolean;
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  jitter: Jitter;
  maxElapsedMs: number;
  attemptTimeoutMs: number;
  budget: RetryBudget | undefined;
  generateKey: () => string;
  onRetry: ((event: RetryEvent) => void) | undefined;
  onSettled: ((event: IdempotencySettledEvent) => void) | undefined;
  random: () => number;
  identity: (() => unknown) | undefined;
  telemetry: OpenTelemetryApi | undefined;
}

const JITTERS: readonly Jitter[] = ['full', 'equal', 'decorrelated', 'none'];

/** Merges defaults once and rejects bad options early, naming the option. */
export function resolveOptions(
  opts: Omit<IdempotencyLinkOptions<AnyRouter>, 'procedures' | 'inputKeyed'> & {
    procedures: readonly string[] | 'all';
    inputKeyed?: readonly string[];
  },
): ResolvedOptions {
  const { procedures, inputKeyed = [] } = opts;
  if (procedures !== 'all' && !Array.isArray(procedures)) {
    throw new TypeError("idempotencyLink: `procedures` must be an array of mutation paths or 'all'");
  }
  if (!Array.isArray(inputKeyed))
    throw new TypeError('idempotencyLink: `inputKeyed` must be an array of mutation paths');
  const fromInput = new Set<string>(inputKeyed);
  const guarded = procedures === 'all' ? undefined : new Set<string>([...procedures, ...inputKeyed]);
  const jitter = opts.jitter ?? 'full';
  if (!JITTERS.includes(jitter)) {
    throw new TypeError(`idempotencyLink: \`jitter\` must be one of ${JITTERS.join(', ')}, got ${String(jitter)}`);
  }
  const budget = opts.budget ?? {};
  return {
    isGuarded: guarded ? (path) => guarded.has(path) : () => true,
    isInputKeyed: fromInput.size > 0 ? (path) => fromInput.has(path) : () => false,
    attempts: integer('attempts', opts.attempts ?? 5, 1),
    baseDelayMs: duration('baseDelayMs', opts.baseDelayMs ?? 300, 0),
    maxDelayMs: duration('maxDelayMs', opts.maxDelayMs ?? 10_000, 0),
    jitter,
    maxElapsedMs: duration('maxElapsedMs', opts.maxElapsedMs ?? 30_000, 0, 'no total-time cap'),
    attemptTimeoutMs: duration('attemptTimeoutMs', opts.attemptTimeoutMs ?? 10_000, 1, 'no attempt timeout'),
    budget: budget === false ? undefined : isBudget(budget) ? budget : retryBudget(budget),
    generateKey: opts.generateKey ?? generateKey,
    onRetry: opts.onRetry,
    onSettled: opts.onSettled,
    random: opts.random ?? Math.random,
    identity: opts.identity,
    telemetry: opts.telemetry,
  };
}

function isBudget(value: RetryBudget | RetryBudgetOptions): value is RetryBudget {
  return (
    typeof (value as RetryBudget).tryAcquireRetry === 'function' &&
    typeof (value as RetryBudget).canRetry === 'function'
  );
}

/**
 * A number of ms ≥ `min`: finite, or `Infinity` where that has a meaning (`unlimited` says which). Past
 * `setTimeout`'s 2^31−1 ms is fine: the link's timers wait such durations out in steps.
 */
function duration(name: string, value: number, min: number, unlimited?: string): number {
  const ok =
    typeof value === 'number' &&
    value >= min &&
    (Number.isFinite(value) || (unlimited !== undefined && value === Number.POSITIVE_INFINITY));
  if (!ok) {
    const infinity = unlimited === undefined ? 'finite' : `finite, or Infinity for ${unlimited}`;
    throw new RangeError(
      `idempotencyLink: \`${name}\` must be a number of ms ≥ ${min} (${infinity}), got ${String(value)}`,
    );
  }
  return value;
}

function integer(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`idempotencyLink: \`${name}\` must be an integer ≥ ${min}, got ${String(value)}`);
  }
  return value;
}
