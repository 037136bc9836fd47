import { callWithIdempotencyContext, type IdempotencyCallInfo, isOutcomeUnknown } from '@trpc-idempotency/client';
import { EarlierOutcomeUnknownError } from '../earlier-outcome-unknown-error.js';
import { type EarlierOutcome, NewInputNotConfirmedError } from '../new-input-not-confirmed-error.js';
import { fingerprint } from './fingerprint.js';

/** One call of the mutation function, as the app may want to list it. */
export interface IdempotentCall<TVariables> {
  key: string;
  variables: TVariables;
  /** True for the re-send that settles an earlier submission before a changed input goes out. */
  earlier: boolean;
  /** Attempts and replay flag, filled in by `idempotencyLink` as the call goes. */
  info: IdempotencyCallInfo;
}

/** How a call ended: `unknown` keeps the key for a "try again". */
export type IdempotentCallResult<TData, TVariables> = IdempotentCall<TVariables> &
  ({ status: 'succeeded'; data: TData } | { status: 'failed'; error: unknown } | { status: 'unknown'; error: unknown });

export interface ActionHooks<TData, TVariables> {
  generateKey: () => string;
  onKey?: (key: string | undefined) => void;
  onCallStart?: (call: IdempotentCall<TVariables>) => void;
  onCallSettled?: (call: IdempotentCallResult<TData, TVariables>) => void;
  onEarlierSettled?: (outcome: EarlierOutcome<TData, TVariables>) => void;
  /** Whether the changed input goes out once the earlier submission is settled. @default its status is 'failed' */
  confirmNewInput?: (earlier: EarlierOutcome<TData, TVariables>, variables: TVariables) => boolean | Promise<boolean>;
  onNotDelivered?: () => void;
}

interface Action<TData, TVariables> {
  key: string;
  fingerprint: string;
  variables: TVariables;
  inFlight: Set<Promise<unknown>>;
  /** The last definitive answer, for an earlier submission settled while a new one waited. */
  last?: EarlierOutcome<TData, TVariables>;
  /** The settling under way, shared by every changed-input submission that waits for it (a double click). */
  settling?: Promise<void>;
  /** Per changed input (by fingerprint), whether it may go out: a double click of it asks once. */
  confirmations?: Map<string, Promise<boolean>>;
}

/**
 * The key of the current user action: kept while its outcome is unknown (double submits, concurrent
 * copies, "try again"), spent by a definitive answer, and settled first when the input changes.
 */
export class ActionController<TData, TVariables> {
  #action: Action<TData, TVariables> | undefined;

  constructor(private readonly hooks: () => ActionHooks<TData, TVariables>) {}

  get key(): string | undefined {
    return this.#action?.key;
  }

  async run<TFnContext>(
    variables: TVariables,
    fnContext: TFnContext,
    mutationFn: (variables: TVariables, context: TFnContext) => Promise<TData>,
  ): Promise<TData> {
    const print = fingerprint(variables);
    let action = this.#action;
    if (action && action.fingerprint !== print) {
      const earlier = action;
      earlier.settling ??= this.#settleEarlier(earlier, fnContext, mutationFn).finally(() => {
        earlier.settling = undefined;
      });
      await earlier.settling;
      if (this.#action?.fingerprint !== print && earlier.last)
        await this.#confirm(earlier, earlier.last, print, variables);
      action = this.#action?.fingerprint === print ? this.#action : undefined;
    }
    if (!action) {
      const key: unknown = this.hooks().generateKey();
      // A non-key would reach the link as "no key", and each send of this action would get its own.
      if (typeof key !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(key)) {
        throw new TypeError(
          `useIdempotentMutation: generateKey gave ${String(key)}, not 1–255 characters of visible ASCII`,
        );
      }
      action = { key, fingerprint: print, variables, inFlight: new Set() };
      this.#action = action;
      this.hooks().onKey?.(action.key);
    }
    return this.#send(action, variables, fnContext, mutationFn, false);
  }

  /** Asks the app whether the changed input goes out now that the earlier submission is settled. */
  async #confirm(
    earlier: Action<TData, TVariables>,
    outcome: EarlierOutcome<TData, TVariables>,
    print: string,
    variables: TVariables,
  ): Promise<void> {
    earlier.confirmations ??= new Map();
    let confirmed = earlier.confirmations.get(print);
    if (!confirmed) {
      const confirm = this.hooks().confirmNewInput ?? ((settled) => settled.status === 'failed');
      confirmed = Promise.resolve().then(() => confirm(outcome, variables));
      earlier.confirmations.set(print, confirmed);
    }
    // Declined: nothing new was sent and no key was made; the next submission of this input is a new action.
    if (!(await confirmed)) throw new NewInputNotConfirmedError(variables, outcome);
  }

  #spend(action: Action<TData, TVariables>): void {
    if (this.#action !== action) return;
    this.#action = undefined;
    this.hooks().onKey?.(undefined);
  }

  #send<TFnContext>(
    action: Action<TData, TVariables>,
    variables: TVariables,
    fnContext: TFnContext,
    mutationFn: (variables: TVariables, context: TFnContext) => Promise<TData>,
    earlier: boolean,
  ): Promise<TData> {
    const hooks = this.hooks();
    const call: IdempotentCall<TVariables> = {
      key: action.key,
      variables,
      earlier,
      info: { attempts: 0, replayed: false, settled: false },
    };
    hooks.onCallStart?.(call);
    let sent: Promise<TData>;
    try {
      const { value, delivered } = callWithIdempotencyContext(
        { idempotencyKey: action.key, idempotencyInfo: call.info },
        () => mutationFn(variables, fnContext),
      );
      if (!delivered) hooks.onNotDelivered?.();
      sent = Promise.resolve(value);
    } catch (error) {
      sent = Promise.reject(error);
    }
    const tracked = sent.then(
      (data) => {
        action.last = { status: 'succeeded', key: action.key, variables, data, replayed: call.info.replayed };
        this.#spend(action);
        hooks.onCallSettled?.({ ...call, status: 'succeeded', data });
        return data;
      },
      (error: unknown) => {
        if (isOutcomeUnknown(error)) {
          hooks.onCallSettled?.({ ...call, status: 'unknown', error });
        } else {
          action.last = { status: 'failed', key: action.key, variables, error };
          this.#spend(action);
          hooks.onCallSettled?.({ ...call, status: 'failed', error });
        }
        throw error;
      },
    );
    action.inFlight.add(tracked);
    const untrack = () => action.inFlight.delete(tracked);
    tracked.then(untrack, untrack);
    return tracked;
  }

  /** Learns what became of `action` before a changed input is sent: waits for it, or re-sends it. */
  async #settleEarlier<TFnContext>(
    action: Action<TData, TVariables>,
    fnContext: TFnContext,
    mutationFn: (variables: TVariables, context: TFnContext) => Promise<TData>,
  ): Promise<void> {
    while (action.inFlight.size > 0) await Promise.allSettled([...action.inFlight]);
    if (this.#action === action) {
      try {
        await this.#send(action, action.variables, fnContext, mutationFn, true);
      } catch (error) {
        if (this.#action === action) throw new EarlierOutcomeUnknownError(action.variables, action.key, error);
      }
    }
    if (action.last) this.hooks().onEarlierSettled?.(action.last);
  }
}
