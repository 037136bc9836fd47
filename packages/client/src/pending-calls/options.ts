import type { AnyRouter } from '@trpc/server';
import { generateKey } from '../generate-key.js';
import type { PendingCallStore } from '../pending-storage/pending-call-store.js';
import type { MutationPath } from '../types.js';

/** The part of a transformer (`superjson`, or one side of `{ input, output }`) that stored inputs go through. */
export interface SerializerLike {
  serialize(value: unknown): unknown;
  deserialize(value: unknown): unknown;
}

/** Options of `pendingCallsLink`. */
export interface PendingCallsLinkOptions<TRouter extends AnyRouter> {
  /** The keyed mutations, as given to `idempotencyLink`. */
  procedures: readonly MutationPath<TRouter>[] | 'all';
  /**
   * The mutations the server keys from their input, as given to `idempotencyLink`: stored and resumed like the
   * others, under a key of the client's own that is never sent (the resumed input gives the server the same key).
   * @default []
   */
  inputKeyed?: readonly MutationPath<TRouter>[];
  /**
   * Where calls without a definitive answer are kept across reloads. Nothing is stored without it: the
   * link then only hands each call's key (the caller's, or `useIdempotentMutation`'s) to `idempotencyLink`.
   * @default undefined — nothing stored
   */
  store?: PendingCallStore;
  /**
   * Whose calls these are: the namespace they are stored, listed, resumed and cleared under. Return
   * `null` or `undefined` while signed out: nothing is stored then. Call `clear()` at sign-out.
   * @default () => 'default'
   */
  user?: () => string | null | undefined;
  /** The transformer of your HTTP link (`superjson`, or `{ input, output }`): stored inputs go through it. */
  transformer?: SerializerLike | { input: SerializerLike; output: SerializerLike };
  /**
   * The server's `ttl`: a stored call older than this, less `safetyMarginMs`, is reported as `expired`
   * and never re-sent — its key may be gone from the server, where a re-send would run it again.
   * @default 86_400_000 (the server's default, 24 h)
   */
  ttlMs?: number;
  /** Room for clock skew and time in transit, taken off `ttlMs`. @default 60_000 */
  safetyMarginMs?: number;
  /** Makes a key for a call that comes without one. @default crypto.randomUUID() */
  generateKey?: () => string;
  /** Told when the store failed; the call is still sent, only not kept across a reload. @default console.warn */
  onStoreError?: (error: unknown) => void;
  /**
   * How long a call waits on the store (the write before its first attempt, the removal before its answer is
   * delivered) before it goes on without it and tells `onStoreError`: a blocked IndexedDB never holds a call.
   * @default 2000
   */
  storeTimeoutMs?: number;
}

/** `pendingCallsLink`'s options with every default merged in, once. */
export interface ResolvedPendingCallsOptions {
  store: PendingCallStore | undefined;
  /** Whether a mutation at `path` is keyed (in `procedures` or `inputKeyed`). */
  isGuarded: (path: string) => boolean;
  /** Whose calls these are now (the `user` option; `'default'` without it), with a store or not. */
  user: () => string | null | undefined;
  /** The namespace calls are stored under now: `undefined` without a store, or while signed out. */
  namespace: () => string | undefined;
  /**
   * Whether a call first sent at `firstSentAt` may be past the server's `ttl`: older than `ttlMs` less the margin,
   * ahead of now by more than the margin (a device clock set ahead, then corrected), or no time at all (damaged).
   */
  isExpired: (firstSentAt: unknown) => boolean;
  serializer: SerializerLike;
  generateKey: () => string;
  onStoreError: (error: unknown) => void;
  storeTimeoutMs: number;
}

const identity: SerializerLike = { serialize: (value) => value, deserialize: (value) => value };

/** Merges the defaults once. */
export function resolvePendingCallsOptions(
  opts: Omit<PendingCallsLinkOptions<AnyRouter>, 'procedures' | 'inputKeyed'> & {
    procedures: readonly string[] | 'all';
    inputKeyed?: readonly string[];
  },
): ResolvedPendingCallsOptions {
  const { store, transformer } = opts;
  const guarded = opts.procedures === 'all' ? undefined : new Set([...opts.procedures, ...(opts.inputKeyed ?? [])]);
  const user = opts.user ?? (() => 'default');
  const ttlMs = opts.ttlMs ?? 86_400_000;
  const safetyMarginMs = opts.safetyMarginMs ?? 60_000;
  return {
    store,
    isGuarded: guarded ? (path) => guarded.has(path) : () => true,
    user,
    namespace: () => (store ? (user() ?? undefined) : undefined),
    isExpired: (firstSentAt) => {
      if (typeof firstSentAt !== 'number') return true;
      const age = Date.now() - firstSentAt;
      return !Number.isFinite(age) || age >= ttlMs - safetyMarginMs || age < -safetyMarginMs;
    },
    serializer: transformer ? ('input' in transformer ? transformer.input : transformer) : identity,
    generateKey: opts.generateKey ?? generateKey,
    onStoreError: opts.onStoreError ?? ((error) => console.warn('pendingCallsLink: store failed', error)),
    storeTimeoutMs: opts.storeTimeoutMs ?? 2000,
  };
}
