import { type Operation, type OperationResultEnvelope, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import type { Observable, Observer, Unsubscribable } from '@trpc/server/observable';
import { keyLockName, withLock } from '../internals/cross-tab-lock.js';
import { refusedUnderAnotherIdentity } from '../internals/outcome.js';
import { isOutcomeUnknown } from '../is-outcome-unknown.js';
import type { PendingCall, PendingCallStore } from '../pending-storage/pending-call-store.js';
import type { ResolvedPendingCallsOptions } from './options.js';
import { type StoreAccess, storeCall } from './store-access.js';

type Envelope<TRouter extends AnyRouter> = OperationResultEnvelope<unknown, TRPCClientError<TRouter>>;
export type CallObserver<TRouter extends AnyRouter> = Observer<Envelope<TRouter>, TRPCClientError<TRouter>>;
export type CallNext<TRouter extends AnyRouter> = (op: Operation) => Observable<Envelope<TRouter>, any>;

/** What a call needs of the recorder that started it: the options, the store, and the session's keys. */
export interface CallSession {
  readonly o: ResolvedPendingCallsOptions;
  readonly access: StoreAccess;
  readonly firstSent: Map<string, number>;
  readonly owners: Map<string, string | null | undefined>;
  hold(key: string): void;
  dropHold(key: string): void;
  isHeld(key: string): boolean;
  forget(ns: string | undefined, key: string): Promise<void>;
}

/**
 * Where one call is: `unsent` (looking up an earlier page load's record of its key), `recording` (its record
 * being written before the first attempt), `inFlight` (handed to the next link), `forgetting` (a definitive answer
 * held until its record is removed), `done` (answered, failed, or cancelled: nothing more is sent or delivered).
 */
export type CallState = 'unsent' | 'recording' | 'inFlight' | 'forgetting' | 'done';

/** One keyed call through `pendingCallsLink`: recorded before its first attempt, forgotten on a definitive answer. */
export class RecordedCall<TRouter extends AnyRouter> {
  #state: CallState = 'unsent';
  #firstSentAt: number;
  readonly #ns: string | undefined;
  /** A caller's key this session has not sent: an earlier page load may have stored it (a form kept its key). */
  readonly #unknownHere: boolean;
  /** A re-send of a call stored by an earlier page load: its record is that call's, never this copy's to drop. */
  #resent: boolean;
  /** The store holds an earlier page load's call under this key with another input: see `begin`. */
  #keepEarlier = false;
  /** This copy removed the record: a write of it that lands later (past `storeTimeoutMs`) is removed again. */
  #forgotten = false;
  #putting: Promise<unknown> | undefined;
  #subscription: Unsubscribable | undefined;
  #answer: Envelope<TRouter> | undefined;
  #release = () => {};

  readonly #session: CallSession;
  readonly #op: Operation;
  readonly #key: string;
  readonly #next: CallNext<TRouter>;
  readonly #observer: CallObserver<TRouter>;

  constructor(
    session: CallSession,
    op: Operation,
    key: string,
    next: CallNext<TRouter>,
    observer: CallObserver<TRouter>,
  ) {
    this.#session = session;
    this.#op = op;
    this.#key = key;
    this.#next = next;
    this.#observer = observer;
    const { context } = op;
    this.#unknownHere =
      context.idempotencyKey !== undefined &&
      context.idempotencyFirstSentAt === undefined &&
      !session.firstSent.has(key);
    this.#firstSentAt = context.idempotencyFirstSentAt ?? session.firstSent.get(key) ?? Date.now();
    session.firstSent.set(key, this.#firstSentAt);
    this.#ns = session.o.namespace();
    this.#resent = context.idempotencyFirstSentAt !== undefined;
    session.hold(key);
  }

  /** Records the call (with a store) and sends it; returns its teardown. */
  open(): () => void {
    const ns = this.#ns;
    const op = this.#op;
    const { store } = this.#session.o;
    const held = new Promise<void>((resolve) => (this.#release = resolve));
    // Held while the call is in flight, so another tab's resume of this key waits for its answer.
    if (ns !== undefined) void withLock(keyLockName(ns, this.#key), () => held);
    const record = this.#recordOf();
    if (record && store && ns !== undefined) {
      void this.#begin(record, store, ns);
      if (op.signal?.aborted) this.#abortBeforeStart();
      else op.signal?.addEventListener('abort', this.#abortBeforeStart, { once: true });
    } else {
      this.#start();
    }
    return () => this.#teardown();
  }

  /** The record to store, or none: no store, signed out, or an input JSON cannot hold (told to `onStoreError`). */
  #recordOf(): PendingCall | undefined {
    const op = this.#op;
    const { store, serializer } = this.#session.o;
    if (this.#ns === undefined || !store) return undefined;
    const { report } = this.#session.access;
    if (!isJsonInput(op.input)) {
      // A FormData, a file or a stream would be stored as "{}" and resumed as another payload: sent, not kept.
      report(new TypeError(`pendingCallsLink: the input of ${op.path} cannot be stored (not JSON data)`));
      return undefined;
    }
    try {
      return {
        key: this.#key,
        path: op.path,
        input: JSON.stringify(serializer.serialize(op.input)),
        firstSentAt: this.#firstSentAt,
      };
    } catch (error) {
      report(error); // an input JSON cannot hold (FormData, a stream) is sent, not kept
      return undefined;
    }
  }

  /** `unsent` → `recording` → sent: looks up an earlier page load's record of the key, writes this one, sends. */
  async #begin(fresh: PendingCall, store: PendingCallStore, ns: string): Promise<void> {
    const session = this.#session;
    const key = this.#key;
    // Across a reload the store tells whose the key is: another user's record means that user's call.
    const owning = this.#unknownHere
      ? ((
          await session.access.wait(
            'namespacesOf',
            storeCall(() => store.namespacesOf(key)),
          )
        )?.value ?? [])
      : [];
    const earlier = owning.includes(ns)
      ? (
          await session.access.wait(
            'list',
            storeCall(() => store.list(ns)),
          )
        )?.value.find((c) => c.key === key)
      : undefined;
    if (this.#state === 'done') return; // cancelled during the lookup: nothing written, nothing sent
    if (owning.length > 0 && !owning.includes(ns)) return this.#refuseOthers(owning[0]);
    if (earlier) {
      this.#resent = true;
      if (session.o.isExpired(earlier.firstSentAt)) return this.#refuseExpired();
      this.#firstSentAt = Math.min(this.#firstSentAt, earlier.firstSentAt);
      session.firstSent.set(key, this.#firstSentAt);
      if (earlier.input !== fresh.input || earlier.path !== fresh.path) {
        // Another payload under the earlier load's key: that call may have run (its answer was lost), and only
        // its record can tell resume() so. It is kept as it is until a send under the key succeeds, which proves
        // the earlier one never ran; an error here (a 422, a lost answer) leaves it.
        this.#keepEarlier = true;
        return this.#start();
      }
    }
    // Recorded before the first attempt: a reload from here on finds it.
    this.#state = 'recording';
    const writing = storeCall(() => store.put(ns, { ...fresh, firstSentAt: this.#firstSentAt }));
    this.#putting = writing;
    // A write that lands after the call was forgotten (it outlived storeTimeoutMs) is forgotten again.
    writing.then(
      () => {
        if (this.#forgotten && !session.isHeld(key)) void session.forget(ns, key);
      },
      () => {},
    );
    await session.access.wait('put', writing);
    this.#start();
  }

  /**
   * An earlier page load first sent this key more than the ttl ago: its key may be gone from the server, where
   * this send would run it again. Never sent, and left for resume() to report as expired.
   */
  #refuseExpired(): void {
    this.#finish();
    this.#session.dropHold(this.#key);
    this.#observer.error(
      TRPCClientError.from(
        new Error(
          `pendingCallsLink: key ${this.#key} of ${this.#op.path} was first sent by an earlier page load more than ` +
            'the ttl (ttlMs less safetyMarginMs) ago; its outcome is unknown and the server may have forgotten it, ' +
            'so it is not sent again: resume() reports it as expired',
        ),
      ),
    );
  }

  /** Only another user's namespace holds the key: that user's call, never sent nor recorded under this one. */
  #refuseOthers(owner: string | undefined): void {
    this.#finish();
    this.#session.dropHold(this.#key);
    this.#session.firstSent.delete(this.#key);
    this.#session.owners.set(this.#key, owner);
    this.#observer.error(refusedUnderAnotherIdentity(this.#op.path, this.#key));
  }

  /** → `inFlight`: hands the call, with its key and first-sent time, to the next link. */
  #start(): void {
    this.#op.signal?.removeEventListener('abort', this.#abortBeforeStart);
    if (this.#state === 'done') return;
    this.#state = 'inFlight';
    const op = this.#op;
    const observer = this.#observer;
    const sent: Operation = {
      ...op,
      context: {
        ...op.context,
        idempotencyKey: this.#key,
        idempotencyFirstSentAt: this.#firstSentAt,
        // An earlier page load's call may have run: only the key's own answer can settle it.
        ...(this.#resent && { idempotencyOutcomeUnknown: true }),
      },
    };
    this.#subscription = this.#next(sent).subscribe({
      next: (envelope) => {
        this.#answer = envelope;
      },
      error: (error) => {
        // The call is over either way; keep it only while its outcome is unknown (or while it is another
        // load's call with another input, whose outcome this answer does not tell).
        if (!isOutcomeUnknown(error) && !this.#keepEarlier) return this.#forgetThenDeliver(() => observer.error(error));
        this.#finish();
        observer.error(error);
      },
      complete: () => {
        // Forgotten before the app sees the answer: a reload right after it resumes nothing.
        this.#forgetThenDeliver(() => {
          if (this.#answer) observer.next(this.#answer);
          observer.complete();
        });
      },
    });
  }

  /** → `forgetting` → `done`: forgets the call, then delivers its answer (removed, timed out, or aborted). */
  #forgetThenDeliver(deliver: () => void): void {
    this.#state = 'forgetting';
    this.#forgotten = true;
    void this.#session.access.wait('remove', this.#session.forget(this.#ns, this.#key), this.#op.signal).then(() => {
      this.#finish();
      deliver();
    });
  }

  #finish(): void {
    this.#state = 'done';
    this.#release();
  }

  /**
   * Cancelled before its first attempt (aborted, or unsubscribed): nothing was sent, so the record is forgotten
   * once its write ends — unless another copy of the key (in flight, or ended with no answer) still needs it.
   */
  #dropUnsent(): void {
    const session = this.#session;
    const key = this.#key;
    session.dropHold(key);
    this.#putting?.then(
      () => {
        if (!this.#resent && !session.isHeld(key)) void session.forget(this.#ns, key);
      },
      () => {},
    );
  }

  /**
   * Aborted while the store write is pending (a blocked IndexedDB, say): nothing was sent, so the call fails at
   * once with the signal's reason. From the first attempt on, `idempotencyLink` answers the signal.
   */
  readonly #abortBeforeStart = (): void => {
    if (this.#state === 'done') return;
    this.#finish();
    this.#dropUnsent();
    const reason: unknown = this.#op.signal?.reason;
    this.#observer.error(
      TRPCClientError.from(reason instanceof Error ? reason : new DOMException('The call was aborted', 'AbortError')),
    );
  };

  #teardown(): void {
    if (this.#state === 'unsent' || this.#state === 'recording') this.#dropUnsent();
    this.#state = 'done';
    this.#op.signal?.removeEventListener('abort', this.#abortBeforeStart);
    this.#subscription?.unsubscribe();
    this.#release();
  }
}

/** Whether an input survives JSON: not a FormData, a Blob or a stream (tRPC's non-JSON inputs). */
function isJsonInput(input: unknown): boolean {
  return !(
    (typeof FormData !== 'undefined' && input instanceof FormData) ||
    (typeof Blob !== 'undefined' && input instanceof Blob) ||
    (typeof ReadableStream !== 'undefined' && input instanceof ReadableStream)
  );
}
