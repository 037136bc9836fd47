import type { TRPCClient, TRPCUntypedClient } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import type { PendingCallsLink, ResumedCall } from '@trpc-idempotency/client';
import { useCallback, useEffect, useRef, useState } from 'react';

export interface ResumePendingCalls {
  /** True until every stored call has been re-sent and answered (or found expired). */
  resuming: boolean;
  /** How each resumed call ended, for a banner: "your payment of $40.00 went through". */
  resumed: ResumedCall[];
  /** Drops one report (the banner was closed). */
  dismiss(key: string): void;
}

/**
 * Resumes the calls a reload or an app kill left pending, once per mount: each is re-sent with its own key
 * through `client` while the server still keeps it, and reported with how it ended.
 */
export function useResumePendingCalls<TRouter extends AnyRouter>(
  pending: Pick<PendingCallsLink<TRouter>, 'resume'>,
  client: TRPCClient<TRouter> | TRPCUntypedClient<TRouter>,
  options: { enabled?: boolean; onResumed?: (calls: ResumedCall[]) => void } = {},
): ResumePendingCalls {
  const enabled = options.enabled ?? true;
  const [resuming, setResuming] = useState(enabled);
  const [resumed, setResumed] = useState<ResumedCall[]>([]);
  // A ref: the app may pass a new callback each render, which must not resume again.
  const onResumed = useRef(options.onResumed);
  onResumed.current = options.onResumed;

  useEffect(() => {
    if (!enabled) return;
    let active = true;
    setResuming(true);
    // A second mount in one tab (StrictMode) shares the first one's re-sends: `resume` dedupes by key.
    pending.resume(client).then(
      (calls) => {
        if (!active) return;
        setResumed(calls);
        setResuming(false);
        if (calls.length > 0) onResumed.current?.(calls);
      },
      (error: unknown) => {
        if (!active) return;
        setResuming(false);
        console.error('useResumePendingCalls: could not read the pending calls', error);
      },
    );
    return () => {
      active = false;
    };
  }, [pending, client, enabled]);

  const dismiss = useCallback((key: string) => setResumed((calls) => calls.filter((c) => c.call.key !== key)), []);
  return { resuming, resumed, dismiss };
}
