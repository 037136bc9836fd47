/**
 * The app's store as a call sees it: every wait on it is bounded by `storeTimeoutMs`, and every failure (a
 * rejection, a synchronous throw, a timeout) goes to `onStoreError` instead of failing the call.
 */
export class StoreAccess {
  readonly #onStoreError: (error: unknown) => void;
  readonly #storeTimeoutMs: number;

  constructor(onStoreError: (error: unknown) => void, storeTimeoutMs: number) {
    this.#onStoreError = onStoreError;
    this.#storeTimeoutMs = storeTimeoutMs;
  }

  /** Tells the app's hook; a hook that throws is logged and changes nothing, as `idempotencyLink`'s hooks. */
  readonly report = (error: unknown): void => {
    try {
      this.#onStoreError(error);
    } catch (thrown) {
      console.error('pendingCallsLink: onStoreError threw', thrown);
    }
  };

  /**
   * Waits on a store call at most `storeTimeoutMs`, or until `signal` aborts, and never fails: a store that does
   * not answer is told to `onStoreError` and the call goes on without it. Resolves with what the store gave, if
   * it answered in time.
   */
  wait<T>(
    what: 'list' | 'namespacesOf' | 'put' | 'remove',
    pending: Promise<T>,
    signal?: AbortSignal | null,
  ): Promise<{ value: T } | undefined> {
    return new Promise((resolve) => {
      const done = (answer?: { value: T }) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(answer);
      };
      const onAbort = () => done();
      const timer = setTimeout(() => {
        this.report(
          new Error(
            `pendingCallsLink: the store's ${what}() took longer than storeTimeoutMs (${this.#storeTimeoutMs} ms)`,
          ),
        );
        done();
      }, this.#storeTimeoutMs);
      if (signal?.aborted) done();
      else signal?.addEventListener('abort', onAbort, { once: true });
      pending.then(
        (value) => done({ value }),
        (error: unknown) => {
          this.report(error);
          done();
        },
      );
    });
  }
}

/** A store call whose synchronous throw (a custom store's) counts as its failure, like a rejection. */
export function storeCall<T>(fn: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve) => resolve(fn()));
}
