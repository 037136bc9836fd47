/** How a backoff delay is randomised. */
export type Jitter = 'full' | 'equal' | 'decorrelated' | 'none';

export interface BackoffInput {
  /** The retry about to be waited for: 1 before the second attempt, 2 before the third, … */
  retry: number;
  baseDelayMs: number;
  maxDelayMs: number;
  jitter: Jitter;
  /** The previous backoff, used by decorrelated jitter; `undefined` before the first retry. */
  previousDelayMs: number | undefined;
  random: () => number;
}

/**
 * The wait before retry n. The exponential ceiling is `min(maxDelayMs, baseDelayMs * 2^(n-1))`;
 * full jitter draws uniformly below it, which spreads a crowd of clients best (AWS Architecture Blog,
 * "Exponential Backoff And Jitter").
 */
export function backoffDelay(input: BackoffInput): number {
  const { retry, baseDelayMs, maxDelayMs, jitter } = input;
  // 2^1023 is the largest finite power of two: a baseDelayMs of 0 must never meet Infinity (0 × ∞ is NaN).
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.min(retry - 1, 1023));
  const random = () => unit(input.random());
  switch (jitter) {
    case 'full':
      return random() * ceiling;
    case 'equal':
      return ceiling / 2 + (random() * ceiling) / 2;
    case 'decorrelated': {
      // Grows from the previous wait rather than the attempt number: between base and 3× the last one.
      const previous = input.previousDelayMs ?? baseDelayMs;
      const upper = Math.max(baseDelayMs, previous * 3);
      return Math.min(maxDelayMs, baseDelayMs + random() * (upper - baseDelayMs));
    }
    case 'none':
      return ceiling;
  }
}

/** A user's random source held to [0, 1]; NaN waits the ceiling rather than not at all. */
function unit(r: number): number {
  return Number.isNaN(r) ? 1 : Math.min(1, Math.max(0, r));
}
