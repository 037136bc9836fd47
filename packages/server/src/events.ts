/** What happened to one call. */
export type IdempotencyEventType =
  /** The handler ran and its outcome (success or stored error) was committed. */
  | 'executed'
  /** A stored outcome was returned without running the handler. */
  | 'replayed'
  /** The call waited for an in-flight original before going on (a `replayed` or `executed` follows). */
  | 'waited'
  /** Answered 409 `in_progress`: the original was still running after `wait`. */
  | 'conflict'
  /** Answered 422 `payload_mismatch`: the key was used with another path or input. */
  | 'mismatch'
  /** The handler failed with an error that is not stored: everything rolled back, the key is free again. */
  | 'released'
  /** Lease mode: this call took over a claim whose holder's lease had expired; the handler runs again. */
  | 'taken_over';

/** One observability event, passed to `onEvent`. */
export interface IdempotencyEvent {
  type: IdempotencyEventType;
  scope: string;
  key: string;
  /** The procedure path, such as `payments.create`. */
  path: string;
  /** Ms from the middleware's start to this event. */
  durationMs: number;
  /** For `released`: the error that released the key. */
  error?: unknown;
}

/** Sends events to `onEvent`, keeping a throwing listener from breaking the call. */
export function createEmitter(onEvent: ((event: IdempotencyEvent) => void) | undefined) {
  if (!onEvent) return undefined;
  return (event: IdempotencyEvent) => {
    try {
      const returned: unknown = onEvent(event);
      // An async listener's rejection would be unhandled (and end the process under Node's default): drop it.
      if (returned instanceof Promise) returned.catch(() => {});
    } catch {
      // Observability must never change the outcome of a call.
    }
  };
}

export type Emit = NonNullable<ReturnType<typeof createEmitter>>;
