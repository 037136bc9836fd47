/**
 * A FIFO async mutex. PGlite has one connection: our transactions must not interleave on it, so on PGlite every
 * session and root statement of the middleware takes this lock (duplicates queue here, in JavaScript, instead of
 * blocking inside Postgres).
 */
export class AsyncMutex {
  #tail: Promise<void> = Promise.resolve();

  /** Resolves with the release function once the lock is held. */
  lock(): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const acquired = this.#tail.then(() => release);
    this.#tail = this.#tail.then(() => held);
    return acquired;
  }
}
