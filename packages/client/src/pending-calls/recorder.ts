import { type Operation, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import type { TeardownLogic } from '@trpc/server/observable';
import { isValidKey, keyText } from '../internals/key-headers.js';
import { refusedUnderAnotherIdentity } from '../internals/outcome.js';
import type { ResolvedPendingCallsOptions } from './options.js';
import { type CallNext, type CallObserver, type CallSession, RecordedCall } from './recorded-call.js';
import { StoreAccess, storeCall } from './store-access.js';

/**
 * What one page load knows of its keyed calls, across them: when each key was first sent, and which copies of a
 * key still need its record. Each call's own state (unsent, recording, in flight, forgetting, done) is a
 * `RecordedCall` the recorder starts.
 */
export class PendingCallsRecorder implements CallSession {
  readonly access: StoreAccess;
  /** First-sent times of this session's keys: a "try again" keeps the time its key was first sent. */
  readonly firstSent = new Map<string, number>();
  /**
   * Per key, this session's copies whose record must stay: the ones in flight and the ones that ended with no
   * definitive answer. A copy cancelled before its first attempt forgets the record only when it held it alone.
   */
  readonly #holders = new Map<string, number>();
  /**
   * Per key this session sent, the user who first sent it (the `user()` of then). Kept until a definitive answer, and
   * across `clear()`: a call whose outcome is unknown stays its user's, whoever signs in meanwhile.
   */
  readonly owners = new Map<string, string | null | undefined>();

  constructor(readonly o: ResolvedPendingCallsOptions) {
    this.access = new StoreAccess(o.onStoreError, o.storeTimeoutMs);
  }

  /** Starts one keyed call (its context already holds the ambient one): its key, its record, its attempts. */
  record<TRouter extends AnyRouter>(
    op: Operation,
    next: CallNext<TRouter>,
    observer: CallObserver<TRouter>,
  ): TeardownLogic {
    let key: string;
    try {
      key = this.#keyOf(op);
    } catch (error) {
      observer.error(TRPCClientError.from(error as Error));
      return;
    }
    // A key is its first sender's: under another user (a "try again" after they signed in) its earlier call, whose
    // outcome may be unknown, would run in their scope and be recorded as theirs. Refused: left to its own user.
    const user = this.o.user();
    if (this.owners.has(key) && !Object.is(this.owners.get(key), user)) {
      observer.error(refusedUnderAnotherIdentity(op.path, key));
      return;
    }
    this.owners.set(key, user);
    return new RecordedCall(this, op, key, next, observer).open();
  }

  /** The caller's key, or a new one. Only an absent key is made here: one of the wrong type fails the call. */
  #keyOf(op: Operation): string {
    const given: unknown = op.context.idempotencyKey === undefined ? this.o.generateKey() : op.context.idempotencyKey;
    if (!isValidKey(given)) {
      throw new TypeError(
        `pendingCallsLink: key ${keyText(given)} for ${op.path} is not a string of 1–255 characters of visible ASCII`,
      );
    }
    return given;
  }

  hold(key: string): void {
    this.#holders.set(key, (this.#holders.get(key) ?? 0) + 1);
  }

  dropHold(key: string): void {
    const left = (this.#holders.get(key) ?? 1) - 1;
    if (left > 0) this.#holders.set(key, left);
    else this.#holders.delete(key);
  }

  isHeld(key: string): boolean {
    return this.#holders.has(key);
  }

  /** Forgets a key in this session and, under `ns`, in the store; never fails (the store's errors are told). */
  async forget(ns: string | undefined, key: string): Promise<void> {
    this.firstSent.delete(key);
    this.#holders.delete(key);
    this.owners.delete(key);
    const { store } = this.o;
    if (ns === undefined || !store) return;
    await storeCall(() => store.remove(ns, key)).catch(this.access.report);
  }

  /** Forgets a call, waiting on the store at most `storeTimeoutMs`. */
  forgetWithin(ns: string, key: string): Promise<unknown> {
    return this.access.wait('remove', this.forget(ns, key));
  }
}
