import type { TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { takeAmbientContext } from './internals/ambient-context.js';
import { type PendingCallsLinkOptions, resolvePendingCallsOptions } from './pending-calls/options.js';
import { PendingCallsRecorder } from './pending-calls/recorder.js';
import { CallResumer } from './pending-calls/resume.js';
import type { PendingCallsLink } from './pending-calls/types.js';

/**
 * Gives each keyed call its key before `idempotencyLink` sees it (the caller's `context.idempotencyKey`,
 * the one `useIdempotentMutation` offers, or a new one) and, with a `store`, records the call before its
 * first attempt and forgets it on a definitive answer. Put it before `idempotencyLink`.
 */
export function pendingCallsLink<TRouter extends AnyRouter>(
  opts: PendingCallsLinkOptions<TRouter>,
): PendingCallsLink<TRouter> {
  const o = resolvePendingCallsOptions(
    opts as Omit<typeof opts, 'procedures' | 'inputKeyed'> & {
      procedures: readonly string[] | 'all';
      inputKeyed?: readonly string[];
    },
  );
  const recorder = new PendingCallsRecorder(o);
  const resumer = new CallResumer<TRouter>(recorder);

  const link: TRPCLink<TRouter> =
    () =>
    ({ op, next }) => {
      if (op.type !== 'mutation' || !o.isGuarded(op.path)) return next(op);
      // Taken now, not on subscribe: only a call started synchronously inside `callWithIdempotencyContext` gets it.
      const ambient = takeAmbientContext();
      return observable((observer) =>
        recorder.record({ ...op, context: { ...op.context, ...ambient } }, next, observer),
      );
    };

  return Object.assign(link, {
    resume: (client: Parameters<PendingCallsLink<TRouter>['resume']>[0]) => resumer.resume(client),
    async list() {
      const ns = o.namespace();
      return ns === undefined || !o.store ? [] : o.store.list(ns);
    },
    async clear(of?: string) {
      const ns = of ?? o.namespace();
      recorder.firstSent.clear();
      if (ns !== undefined && o.store) await o.store.clear(ns);
    },
  });
}
