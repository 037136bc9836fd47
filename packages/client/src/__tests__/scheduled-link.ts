import { type Operation, type OperationResultEnvelope, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import type { Scheduler } from 'fast-check';
import { type Answer, emissionOf } from './scripted-link.js';

/** How the downstream treats one attempt. */
export interface AttemptPlan {
  /** `'complete-only'`: the attempt completes without a result (a broken downstream link). */
  answer: Answer | 'complete-only';
  /**
   * What unsubscribing does to it: `'async'` aborts the request and an AbortError follows later (httpLink);
   * `'sync'` emits that AbortError from inside the unsubscribe; `'outlives'` leaves the request running and
   * its answer still comes (httpBatchLink while a batch sibling waits for the same request).
   */
  onUnsubscribe: 'async' | 'sync' | 'outlives';
  /**
   * Virtual time before the answer is ready; from then on the scheduler decides when it is emitted.
   * `'sync'`: answered from inside `subscribe` (a cache, a local link).
   */
  latencyMs: number | 'sync';
}

/** What happened, in order, between the link and the downstream and between the link and its caller. */
export type Event =
  | { type: 'send'; call: number; attempt: number; key: unknown; at: number }
  | {
      type: 'emit';
      call: number;
      attempt: number;
      kind: 'next' | 'error' | 'complete';
      data?: unknown;
      /** The wait the server asked for with this error (`retryAfterMs` or `Retry-After`). */
      waitMs?: number;
      at: number;
    }
  | { type: 'unsubscribe'; call: number; attempt: number }
  | { type: 'deliver'; call: number; kind: 'next' | 'error' | 'complete'; data?: unknown; error?: unknown; at: number }
  | { type: 'start'; call: number; at: number }
  | { type: 'caller-abort' | 'caller-unsubscribe'; call: number }
  | { type: 'settled'; call: number; error: unknown }
  | { type: 'retry'; call: number; attempt: number };

type Envelope = OperationResultEnvelope<unknown, TRPCClientError<AnyRouter>>;

/**
 * A terminating link whose every emission is a task of a fast-check scheduler, so the scheduler decides how
 * answers, stale answers and aborts interleave with the link's timers. `op.id` names the logical call; a
 * success carries `"<call>.<attempt>"` as its data so a delivered value can be traced to its attempt.
 * `timers` counts its own latency timers, so that the link's can be told apart from them.
 */
export function scheduledLink(s: Scheduler, plan: (call: number, attempt: number) => AttemptPlan, log: Event[]) {
  const attempts = new Map<number, number>();
  const latencies = new Set<ReturnType<typeof setTimeout>>();
  const next = (op: Operation) =>
    observable<Envelope, TRPCClientError<AnyRouter>>((observer) => {
      const call = op.id;
      const attempt = (attempts.get(call) ?? 0) + 1;
      attempts.set(call, attempt);
      log.push({ type: 'send', call, attempt, key: op.context.idempotencyKey, at: Date.now() });
      const { answer, onUnsubscribe, latencyMs } = plan(call, attempt);
      let answered = false;
      let aborted = false;
      const later = (label: string, fn: () => void) => {
        void s.schedule(Promise.resolve(), `call ${call} attempt ${attempt}: ${label}`).then(fn);
      };
      const emit = (kind: 'next' | 'error' | 'complete', fn: () => void, data?: unknown, waitMs?: number) => {
        log.push({
          type: 'emit',
          call,
          attempt,
          kind,
          at: Date.now(),
          ...(data !== undefined && { data }),
          ...(waitMs !== undefined && { waitMs }),
        });
        fn();
      };
      const abortError = () =>
        emit('error', () => observer.error(TRPCClientError.from(new DOMException('aborted', 'AbortError'))));

      const respond = (ready: Exclude<AttemptPlan['answer'], 'hang'>) => {
        if (aborted) return;
        answered = true;
        if (ready === 'complete-only') return emit('complete', () => observer.complete());
        const emission = emissionOf(ready);
        if ('error' in emission) return emit('error', () => observer.error(emission.error), undefined, waitOf(ready));
        const data = `${call}.${attempt}`;
        emit('next', () => observer.next({ ...emission.next, result: { type: 'data', data } }), data);
        later('complete', () => emit('complete', () => observer.complete()));
      };
      let latency: ReturnType<typeof setTimeout> | undefined;
      if (answer !== 'hang' && latencyMs === 'sync') respond(answer);
      else if (answer !== 'hang' && latencyMs !== 'sync') {
        const label = typeof answer === 'string' ? answer : 'data' in answer ? 'result' : `status ${answer.status}`;
        const handle = setTimeout(() => {
          latencies.delete(handle);
          later(label, () => respond(answer));
        }, latencyMs);
        latencies.add(handle);
        latency = handle;
      }
      return () => {
        log.push({ type: 'unsubscribe', call, attempt });
        if (answered || onUnsubscribe === 'outlives') return;
        aborted = true;
        if (latency !== undefined) {
          clearTimeout(latency);
          latencies.delete(latency);
        }
        if (onUnsubscribe === 'sync') abortError();
        else later('AbortError', abortError);
      };
    });
  return { next, timers: () => latencies.size };
}

function waitOf(answer: Exclude<AttemptPlan['answer'], 'hang'>): number | undefined {
  if (typeof answer === 'string' || 'data' in answer) return undefined;
  const seconds = answer.headers?.['retry-after'];
  return answer.retryAfterMs ?? (seconds === undefined ? undefined : Number(seconds) * 1000);
}
