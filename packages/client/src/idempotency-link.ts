import {
  type Operation,
  type OperationContext,
  type OperationResultEnvelope,
  TRPCClientError,
  type TRPCLink,
} from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable, type Unsubscribable } from '@trpc/server/observable';
import { AttemptTimeoutError, IdentityChangedError } from './idempotency-error.js';
import { backoffDelay } from './internals/backoff.js';
import { CallSpan } from './internals/call-span.js';
import { isValidKey, keyText } from './internals/key-headers.js';
import { type IdempotencyLinkOptions, resolveOptions } from './internals/options.js';
import { isKeyAnswer, markOutcomeUnknown, refusedUnderAnotherIdentity } from './internals/outcome.js';
import { wasReplayed } from './internals/response-meta.js';
import { classifyError } from './internals/retry-policy.js';
import { noTimer, startTimer } from './internals/timer.js';
import type { IdempotencyCallInfo } from './types.js';

/**
 * Gives each opted-in mutation an idempotency key, once per logical call, and retries it with that same
 * key under the retry policy, backoff, time cap and retry budget. Queries, subscriptions and mutations not
 * in `procedures` pass through untouched. Put it before the terminating HTTP link, whose `headers` must be
 * {@link idempotencyHeaders} so the key reaches the server.
 */
export function idempotencyLink<TRouter extends AnyRouter>(opts: IdempotencyLinkOptions<TRouter>): TRPCLink<TRouter> {
  const o = resolveOptions(
    opts as Omit<typeof opts, 'procedures' | 'inputKeyed'> & {
      procedures: readonly string[] | 'all';
      inputKeyed?: readonly string[];
    },
  );
  /**
   * Keys whose last call ended with its outcome unknown, with the identity that call started under: a "try again"
   * with such a key starts unanswered, so a refusal that says nothing of the key (a 401 on its first attempt) cannot
   * settle what the earlier call did; and under another identity it is not sent at all, as a retry would not be.
   */
  const unknownKeys = new Map<string, unknown>();
  return () =>
    ({ op, next }) => {
      if (op.type !== 'mutation' || !o.isGuarded(op.path)) return next(op);

      return observable((observer) => {
        const info: IdempotencyCallInfo = op.context.idempotencyInfo ?? {
          attempts: 0,
          replayed: false,
          settled: false,
        };
        const given = op.context.idempotencyKey;
        let key: unknown;
        try {
          // Only an absent key is made here: one of the wrong type is refused below, never silently replaced.
          key = given === undefined ? o.generateKey() : given;
        } catch (cause) {
          observer.error(TRPCClientError.from(cause as Error));
          return;
        }
        if (!isValidKey(key)) {
          observer.error(
            TRPCClientError.from(
              new TypeError(
                `idempotencyLink: key ${keyText(key)} for ${op.path} ` +
                  'is not a string of 1–255 characters of visible ASCII',
              ),
            ),
          );
          return;
        }
        Object.assign(info, { key, attempts: 0, replayed: false, settled: false });
        const span = o.telemetry ? new CallSpan(o.telemetry, op.path) : undefined;
        // The server keys it from its input: the key stays the call's handle here, and no header carries it.
        const sentKey = o.isInputKeyed(op.path) ? undefined : key;

        // Elapsed time on the monotonic clock: a wall clock stepped back (NTP, the user) must not stretch the cap.
        const startedAt = performance.now();
        const elapsed = () => performance.now() - startedAt;
        let attempt = 0;
        let previousBackoff: number | undefined;
        /** The backoff before the current attempt, for its telemetry event. */
        let attemptDelayMs = 0;
        let current: Unsubscribable | undefined;
        let cancelAttemptTimer = noTimer;
        let cancelBackoff = noTimer;
        let finished = false;
        // Set once an attempt ended without an answer (it may have run): from then on only the key's own answer
        // (a result, a stored or replayed error, a payload_mismatch) ends the call's unknown outcome.
        let unanswered = unknownKeys.has(key) || op.context.idempotencyOutcomeUnknown === true;
        let identity: unknown;
        try {
          identity = o.identity?.();
        } catch (cause) {
          observer.error(TRPCClientError.from(cause as Error));
          return;
        }
        if (unknownKeys.has(key) && !Object.is(unknownKeys.get(key), identity)) {
          observer.error(refusedUnderAnotherIdentity(op.path, key));
          return;
        }

        const stopAttempt = () => {
          cancelAttemptTimer();
          current?.unsubscribe();
          current = undefined;
        };

        /** Records the outcome once: the call will send nothing more. */
        const settle = (error?: unknown) => {
          finished = true;
          cancelBackoff();
          stopAttempt();
          op.signal?.removeEventListener('abort', onAbort);
          info.settled = true;
          span?.end(info.attempts, info.replayed, error);
          const event = { op, key, attempts: info.attempts, replayed: info.replayed, settled: true, error };
          unthrowing('onSettled', () => o.onSettled?.(event));
        };

        const fail = (error: unknown) => {
          if (finished) return;
          settle(error);
          const clientError = TRPCClientError.from(error as Error);
          const answer = isKeyAnswer(clientError);
          if (unanswered && !answer) markOutcomeUnknown(clientError);
          if (!answer && (unanswered || classifyError(clientError, Date.now()).retry)) unknownKeys.set(key, identity);
          else unknownKeys.delete(key);
          observer.error(clientError);
        };

        const succeed = (
          envelope: OperationResultEnvelope<unknown, TRPCClientError<TRouter>>,
          context: OperationContext,
        ) => {
          answered();
          unknownKeys.delete(key);
          info.replayed = wasReplayed(envelope.context, context);
          span?.attempt(attempt, attemptDelayMs);
          // Settled before passing the result on: the caller may unsubscribe as soon as it has it.
          settle();
          observer.next(envelope);
          observer.complete();
        };

        // The server stood behind an answer: it is up, which funds other calls' retries.
        const answered = () => unthrowing('budget.recordAnswered', () => o.budget?.recordAnswered());

        /** User code deciding a retry (random, the budget) or a link that throws ends the call with what it threw. */
        const orFail = (fn: () => void) => {
          try {
            fn();
          } catch (thrown) {
            fail(thrown);
          }
        };

        // Cancels a pending backoff or a running attempt at once; nothing more is sent.
        const onAbort = () => {
          const reason: unknown = op.signal?.reason;
          fail(reason instanceof Error ? reason : new DOMException('The call was aborted', 'AbortError'));
        };

        const send = () => {
          attempt++;
          info.attempts = attempt;
          // A fresh context per attempt: idempotencyHeaders records its batch position against it.
          const context: OperationContext = { ...op.context, idempotencyKey: sentKey };
          const attemptOp: Operation = { ...op, context };
          const remaining = o.maxElapsedMs - elapsed();
          const timeoutMs = Math.max(1, Math.min(o.attemptTimeoutMs, remaining));
          // Only the current attempt may fail the call or retry it. It stops being current when it times out
          // or fails; a stale attempt can still answer (with httpBatchLink its request lives on while a batch
          // sibling waits for it), and only its result is taken: the server's answer for this key.
          let isCurrent = true;
          const moveOn = (error: unknown) => {
            // Stale first: what the attempt emits while being let go (an AbortError from inside its
            // unsubscribe, say) must not count as a second failure and start a second retry.
            isCurrent = false;
            span?.attempt(attempt, attemptDelayMs, error);
            stopAttempt(); // the HTTP links abort their request when unsubscribed
            orFail(() => onAttemptError(error, context));
          };
          cancelAttemptTimer = startTimer(timeoutMs, () =>
            moveOn(TRPCClientError.from(new AttemptTimeoutError(timeoutMs))),
          );

          const subscribe = () =>
            next(attemptOp).subscribe({
              next(envelope) {
                if (!finished) succeed(envelope, context);
              },
              error(error) {
                if (!finished && isCurrent) moveOn(error);
              },
              complete() {
                // After a result the call has already completed; without one, the current attempt failed.
                if (!finished && isCurrent) fail(new Error(`idempotencyLink: ${op.path} completed without a result`));
              },
            });
          const subscription = span ? span.within(subscribe) : subscribe();
          // A synchronous answer (or abort) may already have moved on: drop this attempt then.
          if (finished || !isCurrent) subscription.unsubscribe();
          else current = subscription;
        };

        const onAttemptError = (error: unknown, context: OperationContext) => {
          // The wall clock here: a Retry-After may be an HTTP date.
          const verdict = classifyError(error, Date.now());
          if (verdict.retry) unanswered = true;
          else {
            answered();
            // A stored error (a business CONFLICT, say) is replayed too.
            info.replayed = wasReplayed((error as { meta?: unknown }).meta, context);
            fail(error);
            return;
          }
          if (attempt >= o.attempts) return fail(error);
          // A spent budget fails the call now rather than after a backoff that leads nowhere.
          if (o.budget && !o.budget.canRetry()) return fail(error);

          let delayMs: number;
          if (verdict.retryAfterMs !== undefined) {
            delayMs = verdict.retryAfterMs; // the server knows best: not jittered
          } else {
            delayMs = backoffDelay({
              retry: attempt,
              baseDelayMs: o.baseDelayMs,
              maxDelayMs: o.maxDelayMs,
              jitter: o.jitter,
              previousDelayMs: previousBackoff,
              random: o.random,
            });
            previousBackoff = delayMs;
          }
          // Sleeping to the total-time cap only to give up then would waste the caller's time.
          if (elapsed() + delayMs >= o.maxElapsedMs) return fail(error);

          cancelBackoff = startTimer(delayMs, () =>
            orFail(() => {
              // Timers fire late (a 0 ms one after 1 ms, a busy event loop later still): an attempt with no
              // time left would only cost the server a request.
              if (elapsed() >= o.maxElapsedMs) return fail(error);
              // Checked when the retry is due, not when the error came: by then the answers of concurrent
              // calls have landed, so a burst of lost responses among healthy ones is funded by them.
              if (o.budget && !o.budget.tryAcquireRetry()) return fail(error);
              // Headers are read again for the retry: under another identity it would run this input in that
              // user's scope. The first attempts may have run under the first one, so the outcome stays unknown.
              const now = o.identity?.();
              if (!Object.is(now, identity)) return fail(new IdentityChangedError(op.path, error));
              unthrowing('onRetry', () => o.onRetry?.({ op, attempt: attempt + 1, delayMs, error, key }));
              attemptDelayMs = delayMs;
              send();
            }),
          );
        };

        if (op.signal?.aborted) return onAbort();
        op.signal?.addEventListener('abort', onAbort, { once: true });
        send();

        return () => {
          // Unsubscribing cancels like an abort, but silently: nobody is listening any more.
          finished = true;
          cancelBackoff();
          stopAttempt();
          op.signal?.removeEventListener('abort', onAbort);
          span?.end(info.attempts, info.replayed);
        };
      });
    };
}

/**
 * Hooks and the budget's bookkeeping are telemetry: what they throw is logged and changes nothing. Thrown into
 * the link it would swallow a result the server committed, leave a call without its retry, or escape from the
 * caller's `abort()`.
 */
function unthrowing(name: string, fn: () => void): void {
  try {
    fn();
  } catch (error) {
    console.error(`idempotencyLink: ${name} threw; the call goes on as if it had not`, error);
  }
}
