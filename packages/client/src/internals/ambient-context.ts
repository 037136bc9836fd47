import type { OperationContext } from '@trpc/client';

/**
 * Context for the next keyed call started synchronously inside `callWithIdempotencyContext`.
 *
 * Why an ambient value: `@trpc/tanstack-react-query`'s `mutationOptions()` fixes the call's tRPC context
 * when the options are made, once per render, so a per-action key cannot ride in it. Its `mutationFn`
 * reaches the first link synchronously (the untyped client subscribes to the link chain before its first
 * `await`), so a value set around that call is seen by `pendingCallsLink` and by nothing else.
 */
let ambient: { context: OperationContext; delivered: boolean } | undefined;

/**
 * Runs `fn` with `context` offered to the first keyed mutation it starts; `delivered` says whether
 * `pendingCallsLink` took it (false: the link is not in the chain, and the call went without the key).
 */
export function callWithIdempotencyContext<T>(
  context: OperationContext,
  fn: () => T,
): { value: T; delivered: boolean } {
  const previous = ambient;
  const slot = { context, delivered: false };
  ambient = slot;
  try {
    return { value: fn(), delivered: slot.delivered };
  } finally {
    ambient = previous;
  }
}

/** Takes the ambient context, once: a second call started in the same `fn` gets none. */
export function takeAmbientContext(): OperationContext | undefined {
  if (!ambient || ambient.delivered) return undefined;
  ambient.delivered = true;
  return ambient.context;
}
