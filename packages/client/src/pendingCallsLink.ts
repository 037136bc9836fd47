import {
  getUntypedClient,
  type Operation,
  type OperationContext,
  type OperationResultEnvelope,
  type TRPCClient,
  TRPCClientError,
  type TRPCLink,
  TRPCUntypedClient,
} from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { generateKey as defaultGenerateKey } from './generateKey.js';
import { takeAmbientContext } from './internals/ambientContext.js';
import { withLock } from './internals/crossTabLock.js';
import { isValidKey, keyText } from './internals/keyHeaders.js';
import { isMarkedOutcomeUnknown } from './internals/outcome.js';
import { classifyError } from './internals/retryPolicy.js';
import type { PendingCall, PendingCallStore } from './pendingStorage/pendingCallStore.js';
import type { IdempotencyCallInfo, MutationPath } from './types.js';

export { callWithIdempotencyContext } from './internals/ambientContext.js';
export { hasCrossTabLocks } from './internals/crossTabLock.js';
export {
  type AsyncStorageLike,
  type AsyncStorageStoreOptions,
  asyncStorageStore,
} from './pendingStorage/asyncStorageStore.js';
export { type IndexedDBStoreOptions, indexedDBStore } from './pendingStorage/indexedDBStore.js';
export {
  type LocalStorageStoreOptions,
  localStorageStore,
  type WebStorageLike,
} from './pendingStorage/localStorageStore.js';
export type { PendingCall, PendingCallStore } from './pendingStorage/pendingCallStore.js';

declare module '@trpc/client' {
  interface OperationContext {
    /** When the call's key was first sent; set by `pendingCallsLink` (and by `resume`, from the stored call). */
    idempotencyFirstSentAt?: number;
  }
}

interface SerializerLike {
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

/** How a resumed call ended. */
export type ResumedCall =
  /** It went through: `data` is its result (a replay when the first send had run). */
  | { status: 'succeeded'; call: PendingCall; input: unknown; data: unknown; replayed: boolean }
  /** A definitive error (a decline, a validation error): nothing more will change it; forgotten. */
  | { status: 'failed'; call: PendingCall; input: unknown; error: unknown }
  /** Still no definitive answer (offline): kept for the next `resume()`. */
  | { status: 'unknown'; call: PendingCall; input: unknown; error: unknown }
  /** Older than the server's `ttl`: never sent, forgotten. Tell the user to check before paying again. */
  | { status: 'expired'; call: PendingCall; input: unknown };

/** A link with the calls it keeps: `resume` them on start, `clear` them at sign-out. */
export type PendingCallsLink<TRouter extends AnyRouter> = TRPCLink<TRouter> & {
  /**
   * Re-sends every stored call of the current user with its own key, through `client` (whose links must
   * include this one), and reports how each ended. Tabs coordinate through the Web Locks API: a call is
   * re-sent by one tab at a time, the next one gets the server's replay.
   */
  resume(client: TRPCClient<TRouter> | TRPCUntypedClient<TRouter>): Promise<ResumedCall[]>;
  /** The current user's stored calls. */
  list(): Promise<PendingCall[]>;
  /** Forgets the stored calls of `user` (default: the current one). Call it at sign-out. */
  clear(user?: string): Promise<void>;
};

/**
 * Whether a failed keyed call's outcome is unknown: the link gave up on an error it retries (a lost
 * answer, a timeout, a 5xx, a 409 `in_progress`), the call was aborted, or an earlier attempt got no answer
 * and the last one's error says nothing of the key (an auth layer's 401 after the session ended, a CSRF
 * check's 403, a 404 during a deploy, a proxy's page: only the key's own answer, marked by the server's
 * `idempotencyErrorFormatter`, tells). Such a call may have run; send it again with the same key. Any other
 * error is the server's definitive answer and spends the key. An error that did not come out of a tRPC call
 * (`useIdempotentMutation`'s refusal to send a changed input, say) sent nothing: false.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  // By name, not instanceof: a second copy of @trpc/client in a bundle must not turn an unknown into "failed".
  if (!(error instanceof Error && error.name === 'TRPCClientError')) return false;
  return isMarkedOutcomeUnknown(error) || classifyError(error, Date.now()).retry;
}

/**
 * Gives each keyed call its key before `idempotencyLink` sees it (the caller's `context.idempotencyKey`,
 * the one `useIdempotentMutation` offers, or a new one) and, with a `store`, records the call before its
 * first attempt and forgets it on a definitive answer. Put it before `idempotencyLink`.
 */
export function pendingCallsLink<TRouter extends AnyRouter>(
  opts: PendingCallsLinkOptions<TRouter>,
): PendingCallsLink<TRouter> {
  const { store } = opts;
  const guarded =
    opts.procedures === 'all' ? undefined : new Set<string>([...opts.procedures, ...(opts.inputKeyed ?? [])]);
  const user = opts.user ?? (() => 'default');
  const ttlMs = opts.ttlMs ?? 86_400_000;
  const safetyMarginMs = opts.safetyMarginMs ?? 60_000;
  const generateKey = opts.generateKey ?? defaultGenerateKey;
  const onStoreError = opts.onStoreError ?? ((error) => console.warn('pendingCallsLink: store failed', error));
  const storeTimeoutMs = opts.storeTimeoutMs ?? 2000;
  const transformer: SerializerLike = opts.transformer
    ? 'input' in opts.transformer
      ? opts.transformer.input
      : opts.transformer
    : { serialize: (value) => value, deserialize: (value) => value };
  /** First-sent times of this session's keys: a "try again" keeps the time its key was first sent. */
  const firstSent = new Map<string, number>();
  const resuming = new Map<string, Promise<ResumedCall>>();
  /**
   * Per key, this session's copies whose record must stay: the ones in flight and the ones that ended with no
   * definitive answer. A copy cancelled before its first attempt forgets the record only when it held it alone.
   */
  const holders = new Map<string, number>();
  const dropHold = (key: string) => {
    const left = (holders.get(key) ?? 1) - 1;
    if (left > 0) holders.set(key, left);
    else holders.delete(key);
  };

  const namespace = (): string | undefined => (store ? (user() ?? undefined) : undefined);
  const lockName = (ns: string, key: string) => `trpc-idempotency:${ns}:${key}`;
  /** Tells the app's hook; a hook that throws is logged and changes nothing, as `idempotencyLink`'s hooks. */
  const reportStoreError = (error: unknown) => {
    try {
      onStoreError(error);
    } catch (thrown) {
      console.error('pendingCallsLink: onStoreError threw', thrown);
    }
  };
  const forget = async (ns: string | undefined, key: string) => {
    firstSent.delete(key);
    holders.delete(key);
    if (ns === undefined || !store) return;
    await storeCall(() => store.remove(ns, key)).catch(reportStoreError);
  };
  /**
   * Waits on a store call at most `storeTimeoutMs`, or until `signal` aborts, and never fails: a store that does
   * not answer is told to `onStoreError` and the call goes on without it. Resolves with what the store gave, if
   * it answered in time.
   */
  const awaitStore = <T>(
    what: 'list' | 'put' | 'remove',
    pending: Promise<T>,
    signal?: AbortSignal | null,
  ): Promise<{ value: T } | undefined> =>
    new Promise((resolve) => {
      const done = (answer?: { value: T }) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(answer);
      };
      const onAbort = () => done();
      const timer = setTimeout(() => {
        reportStoreError(
          new Error(`pendingCallsLink: the store's ${what}() took longer than storeTimeoutMs (${storeTimeoutMs} ms)`),
        );
        done();
      }, storeTimeoutMs);
      if (signal?.aborted) done();
      else signal?.addEventListener('abort', onAbort, { once: true });
      pending.then(
        (value) => done({ value }),
        (error: unknown) => {
          reportStoreError(error);
          done();
        },
      );
    });
  /** Forgets a call, waiting on the store at most `storeTimeoutMs`. */
  const forgetWithin = (ns: string, key: string) => awaitStore('remove', forget(ns, key));
  /**
   * Whether a call first sent at `firstSentAt` may be past the server's `ttl`: older than `ttlMs` less the margin,
   * ahead of now by more than the margin (a device clock set ahead, then corrected), or no time at all (damaged).
   */
  const isExpired = (firstSentAt: unknown) => {
    if (typeof firstSentAt !== 'number') return true;
    const age = Date.now() - firstSentAt;
    return !Number.isFinite(age) || age >= ttlMs - safetyMarginMs || age < -safetyMarginMs;
  };

  const keyed = (op: Operation) => op.type === 'mutation' && (!guarded || guarded.has(op.path));

  const link: TRPCLink<TRouter> =
    () =>
    ({ op, next }) => {
      if (!keyed(op)) return next(op);
      const ambient = takeAmbientContext();
      return observable((observer) => {
        const context: OperationContext = { ...op.context, ...ambient };
        let key: string;
        try {
          // Only an absent key is made here: one of the wrong type fails the call, never silently replaced.
          const given: unknown = context.idempotencyKey === undefined ? generateKey() : context.idempotencyKey;
          if (!isValidKey(given)) {
            throw new TypeError(
              `pendingCallsLink: key ${keyText(given)} for ${op.path} is not a string of 1–255 characters of visible ASCII`,
            );
          }
          key = given;
        } catch (error) {
          observer.error(TRPCClientError.from(error as Error));
          return;
        }
        // A caller's key this session has not sent may have been stored by an earlier page load (a form that kept its
        // key across the reload): that call's record is looked up before this one is written over it.
        const unknownHere =
          context.idempotencyKey !== undefined && context.idempotencyFirstSentAt === undefined && !firstSent.has(key);
        let firstSentAt = context.idempotencyFirstSentAt ?? firstSent.get(key) ?? Date.now();
        firstSent.set(key, firstSentAt);
        const ns = namespace();
        // A re-send of a call stored by an earlier page load: its record is that call's, never this copy's to drop.
        let resent = context.idempotencyFirstSentAt !== undefined;
        holders.set(key, (holders.get(key) ?? 0) + 1);

        let finished = false;
        let forgotten = false;
        let release = () => {};
        const held = new Promise<void>((resolve) => (release = resolve));
        // Held while the call is in flight, so another tab's resume of this key waits for its answer.
        if (ns !== undefined) void withLock(lockName(ns, key), () => held);
        let subscription: { unsubscribe(): void } | undefined;
        let answer: OperationResultEnvelope<unknown, TRPCClientError<TRouter>> | undefined;

        /** Forgets the call, then delivers its answer: once removed, or after `storeTimeoutMs`, or on abort. */
        const forgetThenDeliver = (deliver: () => void) => {
          forgotten = true;
          void awaitStore('remove', forget(ns, key), op.signal).then(() => {
            finished = true;
            release();
            deliver();
          });
        };

        const start = () => {
          op.signal?.removeEventListener('abort', onAbortBeforeStart);
          if (finished) return;
          const sent: Operation = {
            ...op,
            context: {
              ...context,
              idempotencyKey: key,
              idempotencyFirstSentAt: firstSentAt,
              // An earlier page load's call may have run: only the key's own answer can settle it.
              ...(resent && { idempotencyOutcomeUnknown: true }),
            },
          };
          subscription = next(sent).subscribe({
            next(envelope) {
              answer = envelope;
            },
            error(error) {
              // The call is over either way; keep it only while its outcome is unknown (or while it is another
              // load's call with another input, whose outcome this answer does not tell).
              if (!isOutcomeUnknown(error) && !keepEarlier) return forgetThenDeliver(() => observer.error(error));
              finished = true;
              release();
              observer.error(error);
            },
            complete() {
              // Forgotten before the app sees the answer: a reload right after it resumes nothing.
              forgetThenDeliver(() => {
                if (answer) observer.next(answer);
                observer.complete();
              });
            },
          });
        };

        let record: PendingCall | undefined;
        /** The store holds an earlier page load's call under this key with another input: see `begin`. */
        let keepEarlier = false;
        if (ns !== undefined && store && !isJsonInput(op.input)) {
          // A FormData, a file or a stream would be stored as "{}" and resumed as another payload: sent, not kept.
          reportStoreError(new TypeError(`pendingCallsLink: the input of ${op.path} cannot be stored (not JSON data)`));
        } else if (ns !== undefined && store) {
          try {
            record = { key, path: op.path, input: JSON.stringify(transformer.serialize(op.input)), firstSentAt };
          } catch (error) {
            reportStoreError(error); // an input JSON cannot hold (FormData, a stream) is sent, not kept
          }
        }
        let putting: Promise<unknown> | undefined;
        /**
         * Cancelled before its first attempt (aborted, or unsubscribed): nothing was sent, so the record is forgotten
         * once its write ends — unless another copy of the key (in flight, or ended with no answer) still needs it.
         */
        const dropUnsent = () => {
          dropHold(key);
          if (putting)
            void putting.then(
              () => {
                if (!resent && !holders.has(key)) void forget(ns, key);
              },
              () => {},
            );
        };
        // Aborted while the store write is pending (a blocked IndexedDB, say): nothing was sent, so the call fails at
        // once with the signal's reason. From the first attempt on, `idempotencyLink` answers the signal.
        const onAbortBeforeStart = () => {
          if (finished) return;
          finished = true;
          release();
          dropUnsent();
          const reason: unknown = op.signal?.reason;
          observer.error(
            TRPCClientError.from(
              reason instanceof Error ? reason : new DOMException('The call was aborted', 'AbortError'),
            ),
          );
        };
        if (record && store && ns !== undefined) {
          const fresh = record;
          const begin = async () => {
            const earlier = unknownHere
              ? (
                  await awaitStore(
                    'list',
                    storeCall(() => store.list(ns)),
                  )
                )?.value.find((c) => c.key === key)
              : undefined;
            if (finished) return; // cancelled during the lookup: nothing written, nothing sent
            if (earlier) {
              resent = true;
              if (isExpired(earlier.firstSentAt)) {
                // Its key may be gone from the server, where this send would run it again: never sent, and left for
                // resume() to report as expired.
                finished = true;
                release();
                dropHold(key);
                observer.error(
                  TRPCClientError.from(
                    new Error(
                      `pendingCallsLink: key ${key} of ${op.path} was first sent by an earlier page load more than the ttl ` +
                        '(ttlMs less safetyMarginMs) ago; its outcome is unknown and the server may have forgotten it, ' +
                        'so it is not sent again: resume() reports it as expired',
                    ),
                  ),
                );
                return;
              }
              firstSentAt = Math.min(firstSentAt, earlier.firstSentAt as number);
              firstSent.set(key, firstSentAt);
              if (earlier.input !== fresh.input || earlier.path !== fresh.path) {
                // Another payload under the earlier load's key: that call may have run (its answer was lost), and
                // only its record can tell resume() so. It is kept as it is until a send under the key succeeds,
                // which proves the earlier one never ran; an error here (a 422, a lost answer) leaves it.
                keepEarlier = true;
                start();
                return;
              }
            }
            // Recorded before the first attempt: a reload from here on finds it.
            const stored: PendingCall = { ...fresh, firstSentAt };
            const writing = storeCall(() => store.put(ns, stored));
            putting = writing;
            // A write that lands after the call was forgotten (it outlived storeTimeoutMs) is forgotten again.
            writing.then(
              () => {
                if (forgotten && !holders.has(key)) void forget(ns, key);
              },
              () => {},
            );
            await awaitStore('put', writing);
            start();
          };
          void begin();
          if (op.signal?.aborted) onAbortBeforeStart();
          else op.signal?.addEventListener('abort', onAbortBeforeStart, { once: true });
        } else {
          start();
        }

        return () => {
          if (!finished && !subscription) dropUnsent();
          finished = true;
          op.signal?.removeEventListener('abort', onAbortBeforeStart);
          subscription?.unsubscribe();
          release();
        };
      });
    };

  const resumeOne = async (
    untyped: TRPCUntypedClient<TRouter>,
    ns: string,
    call: PendingCall,
  ): Promise<ResumedCall> => {
    let input: unknown;
    try {
      input = transformer.deserialize(JSON.parse(call.input));
    } catch (error) {
      await forgetWithin(ns, call.key);
      return { status: 'failed', call, input: undefined, error };
    }
    if (!isValidKey(call.key)) {
      // A stored entry damaged outside this link: it cannot be sent under its key, so it is never sent.
      await forgetWithin(ns, call.key);
      return { status: 'failed', call, input, error: new TypeError(`stored key ${keyText(call.key)} is not a key`) };
    }
    if (guarded && !guarded.has(call.path)) {
      // No longer keyed (the app's `procedures` changed): a re-send would carry no key, so it is never sent.
      await forgetWithin(ns, call.key);
      return {
        status: 'failed',
        call,
        input,
        error: new Error(`${call.path} is not in pendingCallsLink's procedures`),
      };
    }
    return withLock(lockName(ns, call.key), async (): Promise<ResumedCall> => {
      if (isExpired(call.firstSentAt)) {
        await forgetWithin(ns, call.key);
        return { status: 'expired', call, input };
      }
      const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
      const context: OperationContext = {
        idempotencyKey: call.key,
        idempotencyFirstSentAt: call.firstSentAt,
        idempotencyInfo: info,
      };
      try {
        const data = await untyped.mutation(call.path, input, { context });
        return { status: 'succeeded', call, input, data, replayed: info.replayed };
      } catch (error) {
        return { status: isOutcomeUnknown(error) ? 'unknown' : 'failed', call, input, error };
      }
    });
  };

  return Object.assign(link, {
    async resume(client: TRPCClient<TRouter> | TRPCUntypedClient<TRouter>) {
      const ns = namespace();
      if (ns === undefined || !store) return [];
      const untyped = client instanceof TRPCUntypedClient ? client : getUntypedClient(client);
      const calls =
        (
          await awaitStore(
            'list',
            storeCall(() => store.list(ns)),
          )
        )?.value ?? [];
      return Promise.all(
        calls.map((call) => {
          // Twice in one tab (a React StrictMode effect, two components): one re-send.
          let running = resuming.get(call.key);
          if (!running) {
            running = resumeOne(untyped, ns, call).finally(() => resuming.delete(call.key));
            resuming.set(call.key, running);
          }
          return running;
        }),
      );
    },
    async list() {
      const ns = namespace();
      return ns === undefined || !store ? [] : store.list(ns);
    },
    async clear(of?: string) {
      const ns = of ?? namespace();
      firstSent.clear();
      if (ns !== undefined && store) await store.clear(ns);
    },
  });
}

/** A store call whose synchronous throw (a custom store's) counts as its failure, like a rejection. */
function storeCall<T>(fn: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve) => resolve(fn()));
}

/** Whether an input survives JSON: not a FormData, a Blob or a stream (tRPC's non-JSON inputs). */
function isJsonInput(input: unknown): boolean {
  return !(
    (typeof FormData !== 'undefined' && input instanceof FormData) ||
    (typeof Blob !== 'undefined' && input instanceof Blob) ||
    (typeof ReadableStream !== 'undefined' && input instanceof ReadableStream)
  );
}
