/** Development builds: bundlers replace `process.env.NODE_ENV`; where nothing does and there is no `process`, not. */
export function isDevelopment(): boolean {
  try {
    return process.env.NODE_ENV !== 'production';
  } catch {
    return false;
  }
}

const isSet = (retry: unknown) => retry !== undefined && retry !== 0 && retry !== false;

export function warnRetrySet(retry: unknown, defaultRetry: unknown): void {
  if (!isSet(retry) && !isSet(defaultRetry)) return;
  console.warn(
    "useIdempotentMutation: React Query's mutation `retry` " +
      `(${String(isSet(retry) ? retry : defaultRetry)}) is ignored and set to 0. ` +
      'idempotencyLink is the one layer that retries: with the same key, backoff, Retry-After and a retry budget. ' +
      'A second layer would multiply the attempts and retry what the link decided not to.',
  );
}

let warnedNotDelivered = false;

/** Always, not only in development: without the key the action can be charged twice. */
export function warnKeyNotDelivered(): void {
  if (warnedNotDelivered) return;
  warnedNotDelivered = true;
  console.error(
    "useIdempotentMutation: the action's idempotency key did not reach the link chain, " +
      'so this call got a key of its own and a "try again" would not reuse it. ' +
      'Put pendingCallsLink() before idempotencyLink() in your tRPC client links.',
  );
}
