/**
 * Decides whether a retry may be sent. One budget is shared by every call through a link, so that in an
 * outage the client stops multiplying its load while a healthy service still gets its stragglers retried.
 */
export interface RetryBudget {
  /**
   * Records an attempt the server answered for good: a result, or an error that is not retried.
   * Such answers show the service is up, and fund retries.
   */
  recordAnswered(): void;
  /**
   * Whether a retry could be taken now, without taking it. Asked when an attempt fails, so that a call whose
   * retry cannot be funded fails at once instead of sleeping through a backoff first.
   */
  canRetry(): boolean;
  /** Takes one retry from the budget, when it is due. `false` when spent: the call then fails with its last error. */
  tryAcquireRetry(): boolean;
}

/** Options of {@link retryBudget}. */
export interface RetryBudgetOptions {
  /**
   * Length of the sliding window, in ms, over which answers and retries are counted. Old traffic neither
   * funds nor blocks retries for longer than this.
   * @default 10_000
   */
  windowMs?: number;
  /**
   * Retries allowed in any window regardless of traffic, so a quiet client (a single failed call) can still
   * retry. This is what an outage costs at most: `minRetries` extra requests per window.
   * @default 10
   */
  minRetries?: number;
  /**
   * Retries each answered attempt buys. 0.5 lets a service that answers 70% of calls have the other 30%
   * retried (70 × 0.5 = 35 ≥ 30), while an outage — no answers at all — gets only `minRetries`.
   * @default 0.5
   */
  retryRatio?: number;
  /**
   * The clock, for tests: milliseconds that only move forward. One stepped back (a wall clock corrected) empties the
   * window rather than holding its counts until it catches up. @default performance.now
   */
  now?: () => number;
}

const SLOTS = 10;

/**
 * A retry budget in the spirit of Finagle's `RetryBudget` (percentCanRetry + minRetriesPerSec over a TTL
 * window) and gRPC retry throttling, but funded by *answered* attempts rather than sent ones:
 *
 *   retries in the last `windowMs` ≤ `minRetries` + `retryRatio` × answered attempts in the last `windowMs`.
 *
 * Funding by sent attempts cannot tell a few lost responses (retry them all) from an outage (retry almost
 * none): both send the same first attempts. Funding by answers can. Counts live in `SLOTS` time slots, so
 * memory stays constant whatever the traffic.
 */
export function retryBudget(opts: RetryBudgetOptions = {}): RetryBudget {
  const windowMs = positive('windowMs', opts.windowMs ?? 10_000);
  const minRetries = nonNegative('minRetries', opts.minRetries ?? 10);
  const retryRatio = nonNegative('retryRatio', opts.retryRatio ?? 0.5);
  const now = opts.now ?? (() => performance.now());
  const slotMs = windowMs / SLOTS;
  const answered = new Array<number>(SLOTS).fill(0);
  const retried = new Array<number>(SLOTS).fill(0);
  let currentSlot = Math.floor(now() / slotMs);

  /** Moves to the slot of the current time, clearing the slots that fell out of the window. */
  function advance(): number {
    const slot = Math.floor(now() / slotMs);
    // A clock stepped back: every count is of unknown age, so none stays (nor funds, nor blocks).
    const stale = slot < currentSlot ? SLOTS : Math.min(SLOTS, slot - currentSlot);
    for (let i = 1; i <= stale; i++) {
      const index = (currentSlot + i) % SLOTS;
      answered[index] = 0;
      retried[index] = 0;
    }
    currentSlot = slot;
    return currentSlot % SLOTS;
  }

  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  return {
    recordAnswered() {
      const slot = advance();
      answered[slot] = answered[slot]! + 1;
    },
    canRetry() {
      advance();
      return sum(retried) + 1 <= minRetries + retryRatio * sum(answered);
    },
    tryAcquireRetry() {
      const slot = advance();
      if (sum(retried) + 1 > minRetries + retryRatio * sum(answered)) return false;
      retried[slot] = retried[slot]! + 1;
      return true;
    },
  };
}

function positive(name: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) {
    throw new RangeError(`retryBudget: \`${name}\` must be a positive number of ms, got ${value}`);
  }
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!(Number.isFinite(value) && value >= 0)) {
    throw new RangeError(`retryBudget: \`${name}\` must be a number ≥ 0, got ${value}`);
  }
  return value;
}
