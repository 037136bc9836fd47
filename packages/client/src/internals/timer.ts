/** The longest delay `setTimeout` honours (a signed 32-bit int): Node and browsers fire a longer one after 1 ms. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Cancels a timer from {@link startTimer}; harmless once it has fired or been cancelled. */
export type CancelTimer = () => void;

export const noTimer: CancelTimer = () => {};

/**
 * Calls `fn` once after `ms`, however long. A wait past `setTimeout`'s range is slept in steps rather than
 * overflowing to 1 ms; `Infinity` arms no timer at all, so nothing fires and nothing is left to clear.
 */
export function startTimer(ms: number, fn: () => void): CancelTimer {
  if (ms === Number.POSITIVE_INFINITY) return noTimer;
  // Whole ms, as setTimeout counts them (a fraction is dropped), so the wait planned is the wait armed.
  let left = Math.max(0, Math.floor(ms));
  let handle: ReturnType<typeof setTimeout>;
  const arm = () => {
    const step = Math.min(left, MAX_TIMEOUT_MS);
    handle = setTimeout(() => {
      left -= step;
      if (left > 0) arm();
      else fn();
    }, step);
  };
  arm();
  return () => clearTimeout(handle);
}
