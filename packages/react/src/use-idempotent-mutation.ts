import {
  type DefaultError,
  type QueryClient,
  type UseMutationOptions,
  type UseMutationResult,
  useMutation,
  useQueryClient,
} from '@tanstack/react-query';
import { generateKey as defaultGenerateKey } from '@trpc-idempotency/client';
import { useCallback, useEffect, useRef, useState } from 'react';
import { ActionController, type IdempotentCall, type IdempotentCallResult } from './internals/action-controller.js';
import { isDevelopment, warnKeyNotDelivered, warnRetrySet } from './internals/warnings.js';
import type { EarlierOutcome } from './new-input-not-confirmed-error.js';

/** Options of `useIdempotentMutation` beyond the mutation's own. */
export interface IdempotentMutationSettings<TData, TVariables> {
  /**
   * Told what became of the earlier submission when the input changed while its outcome was unknown:
   * it was settled first (re-sent with its own key and input), before the new input went out.
   */
  onEarlierSettled?: (outcome: EarlierOutcome<TData, TVariables>) => void;
  /**
   * Asked, once the earlier submission is settled, whether the changed input goes out under a new key; may
   * return a promise (a dialog). Declined, the mutation fails with `NewInputNotConfirmedError` and nothing new
   * is sent: the next submission of that input is a new action. By default only after a definitive failure
   * (a decline): a user who changed the amount believing the first payment failed is not charged twice unasked.
   * @default (earlier) => earlier.status === 'failed'
   */
  confirmNewInput?: (earlier: EarlierOutcome<TData, TVariables>, variables: TVariables) => boolean | Promise<boolean>;
  /** Called as each call of the mutation function starts (the earlier submission's re-send included). */
  onCallStart?: (call: IdempotentCall<TVariables>) => void;
  /** Called as each call ends: `succeeded`, `failed` (a definitive error), or `unknown` (key kept). */
  onCallSettled?: (call: IdempotentCallResult<TData, TVariables>) => void;
  /** Makes the key of a new action. @default crypto.randomUUID() */
  generateKey?: () => string;
}

/** What `useMutation` returns, plus the current action's key and how the earlier submission ended. */
export type IdempotentMutationResult<TData, TError, TVariables, TContext> = UseMutationResult<
  TData,
  TError,
  TVariables,
  TContext
> & {
  idempotency: {
    /** The key the next `mutate()` sends: the current action's, or `undefined` when the next one starts afresh. */
    key: string | undefined;
    /** How the last earlier submission ended, once a changed input made it settle. */
    earlier: EarlierOutcome<TData, TVariables> | undefined;
  };
};

/**
 * `useMutation` with one idempotency key per user action rather than per `mutate()`:
 *
 * ```ts
 * const pay = useIdempotentMutation(trpc.payments.create.mutationOptions());
 * ```
 *
 * A double submit, a concurrent copy or a "try again" after an unknown outcome (the link gave up on lost
 * answers, timeouts, 5xx or 409 `in_progress`) reuses the key, so the server runs the action once and
 * replays it. A definitive answer — a result, or an error the link does not retry — spends the key.
 * Changing the input while the outcome is unknown first settles the earlier submission (re-sent with its
 * own key and input, reported through `idempotency.earlier` and `onEarlierSettled`), then sends the new
 * input under a new key if `confirmNewInput` agrees (by default: only when the earlier one failed), else
 * fails with `NewInputNotConfirmedError`; if the earlier one still cannot be settled, the new input is not
 * sent and the mutation fails with `EarlierOutcomeUnknownError`.
 *
 * Needs `pendingCallsLink` before `idempotencyLink` in the client's links: it hands the key to the link.
 * React Query's own `retry` is forced to 0 (a warning in development when set): the link retries.
 */
export function useIdempotentMutation<TData = unknown, TError = DefaultError, TVariables = void, TContext = unknown>(
  options: UseMutationOptions<TData, TError, TVariables, TContext>,
  settings: IdempotentMutationSettings<TData, TVariables> = {},
  queryClient?: QueryClient,
): IdempotentMutationResult<TData, TError, TVariables, TContext> {
  const client = useQueryClient(queryClient);
  const settingsRef = useRef(settings);
  settingsRef.current = settings;
  const mutationFnRef = useRef(options.mutationFn);
  mutationFnRef.current = options.mutationFn;
  const [key, setKey] = useState<string | undefined>(undefined);
  const [earlier, setEarlier] = useState<EarlierOutcome<TData, TVariables> | undefined>(undefined);

  const [controller] = useState(
    () =>
      new ActionController<TData, TVariables>(() => {
        const s = settingsRef.current;
        return {
          generateKey: s.generateKey ?? defaultGenerateKey,
          onKey: setKey,
          onCallStart: s.onCallStart,
          onCallSettled: s.onCallSettled,
          confirmNewInput: s.confirmNewInput,
          onEarlierSettled: (outcome) => {
            setEarlier(outcome);
            s.onEarlierSettled?.(outcome);
          },
          onNotDelivered: warnKeyNotDelivered,
        };
      }),
  );

  const mutationFn = useCallback(
    (variables: TVariables, context: Parameters<NonNullable<typeof options.mutationFn>>[1]) => {
      const fn = mutationFnRef.current;
      if (!fn) throw new Error('useIdempotentMutation: the options have no mutationFn (pass `…mutationOptions()`)');
      return controller.run(variables, context, fn);
    },
    [controller],
  );

  const retry = options.retry;
  const defaultRetry = client.getDefaultOptions().mutations?.retry;
  useEffect(() => {
    if (isDevelopment()) warnRetrySet(retry, defaultRetry);
  }, [retry, defaultRetry]);

  // retry: 0 also overrides a QueryClient default: the link is the one layer that retries.
  const mutation = useMutation({ ...options, mutationFn, retry: 0 }, client);
  return { ...mutation, idempotency: { key, earlier } };
}
