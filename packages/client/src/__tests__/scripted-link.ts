import { type Operation, type OperationResultEnvelope, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';

/** What the scripted server does with one attempt. */
export type Answer =
  | { data: unknown; headers?: Record<string, string> }
  | {
      status: number;
      reason?: string;
      retryAfterMs?: number;
      headers?: Record<string, string>;
      /** The server's `idempotencyAnswer`: the error is the key's own outcome (stored, replayed, mismatch). */
      keyAnswer?: boolean;
    }
  | 'network'
  | 'hang';

/** One attempt as the terminating link saw it. */
export interface SeenAttempt {
  op: Operation;
  at: number;
  aborted: boolean;
}

/**
 * A terminating link that answers each attempt from a script, the way httpLink would: results carry
 * `context.response`, errors carry `meta.response` and the error formatter's `data`.
 */
export function scriptedLink(script: (attempt: number, op: Operation) => Answer) {
  const seen: SeenAttempt[] = [];
  const link: TRPCLink<AnyRouter> =
    () =>
    ({ op }) =>
      observable((observer) => {
        const entry: SeenAttempt = { op, at: Date.now(), aborted: false };
        seen.push(entry);
        const answer = script(seen.length, op);
        // Answer on a microtask, like a real request would.
        let cancelled = false;
        let done = false;
        queueMicrotask(() => {
          if (cancelled || answer === 'hang') return;
          done = true;
          const emission = emissionOf(answer);
          if ('error' in emission) return observer.error(emission.error);
          observer.next(emission.next);
          observer.complete();
        });
        return () => {
          cancelled = true;
          if (!done) entry.aborted = true;
        };
      });
  return { link, seen };
}

/** What httpLink would emit for an answer: a result envelope, or the TRPCClientError it makes. */
export function emissionOf(
  answer: Exclude<Answer, 'hang'>,
): { next: OperationResultEnvelope<unknown, TRPCClientError<AnyRouter>> } | { error: TRPCClientError<AnyRouter> } {
  if (answer === 'network') return { error: TRPCClientError.from(new TypeError('fetch failed')) };
  if ('data' in answer) {
    const response = new Response(null, { status: 200, headers: answer.headers });
    return { next: { result: { type: 'data', data: answer.data }, context: { response } } };
  }
  const response = new Response(null, { status: answer.status, headers: answer.headers });
  const idempotency = answer.reason
    ? { reason: answer.reason, ...(answer.retryAfterMs !== undefined && { retryAfterMs: answer.retryAfterMs }) }
    : undefined;
  const body = {
    error: {
      code: -32603,
      message: `status ${answer.status}`,
      data: { httpStatus: answer.status, idempotency, idempotencyAnswer: answer.keyAnswer ?? false },
    },
  };
  return { error: TRPCClientError.from(body, { meta: { response } }) };
}

export const ok = (data: unknown = 'ok'): Answer => ({ data });
