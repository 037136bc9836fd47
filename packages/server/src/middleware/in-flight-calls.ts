/** How a call got past the gate. */
export type GateResult =
  | { outcome: 'entered'; waited: boolean; leave: () => void }
  | { outcome: 'mismatch' }
  | { outcome: 'timeout' };

interface InFlight {
  fingerprint: string;
  done: Promise<void>;
}

/**
 * Calls of this process that are past the gate, by scope and key. A duplicate waits here, in JavaScript, for the
 * original instead of holding a pooled connection blocked in Postgres; across processes the claim in Postgres
 * still decides. On PGlite (one connection) this is the only place duplicates can wait.
 */
export class InFlightCalls {
  readonly #calls = new Map<string, InFlight>();
  readonly #otherPayloadWaits: boolean;

  /**
   * `otherPayloadWaits`: a call of another payload waits like a duplicate, then the mode decides (transaction mode:
   * in Postgres its claim would wait for the original's, then run if the original released the key, or answer 422
   * if it stored a result). Otherwise it is refused at once (lease mode: an in-progress claim of another payload is
   * a 422 in Postgres too).
   */
  constructor(otherPayloadWaits: boolean) {
    this.#otherPayloadWaits = otherPayloadWaits;
  }

  /** Enters when no call with this id runs here; otherwise waits for it until `deadline` (performance.now() ms). */
  async enter(id: string, fingerprint: string, deadline: number): Promise<GateResult> {
    let waited = false;
    for (;;) {
      const current = this.#calls.get(id);
      if (!current) {
        let leave!: () => void;
        const done = new Promise<void>((resolve) => {
          leave = () => {
            if (this.#calls.get(id)?.done === done) this.#calls.delete(id);
            resolve();
          };
        });
        this.#calls.set(id, { fingerprint, done });
        return { outcome: 'entered', waited, leave };
      }
      if (current.fingerprint !== fingerprint && !this.#otherPayloadWaits) return { outcome: 'mismatch' };
      const left = deadline - performance.now();
      waited = true;
      if (left <= 0 || !(await settlesWithin(current.done, left))) return { outcome: 'timeout' };
    }
  }
}

function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    promise.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
