import { getUntypedClient, type OperationContext, type TRPCClient, TRPCUntypedClient } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { keyLockName, withLock } from '../internals/cross-tab-lock.js';
import { isValidKey, keyText } from '../internals/key-headers.js';
import { isOutcomeUnknown } from '../is-outcome-unknown.js';
import type { PendingCall } from '../pending-storage/pending-call-store.js';
import type { IdempotencyCallInfo } from '../types.js';
import type { PendingCallsRecorder } from './recorder.js';
import { storeCall } from './store-access.js';
import type { ResumedCall } from './types.js';

/** `resume()`: re-sends the stored calls of the current user, one send of a key at a time. */
export class CallResumer<TRouter extends AnyRouter> {
  /** The resumes of this tab under way, by key: twice in one tab (a React StrictMode effect) is one re-send. */
  readonly #resuming = new Map<string, Promise<ResumedCall>>();

  readonly #recorder: PendingCallsRecorder;

  constructor(recorder: PendingCallsRecorder) {
    this.#recorder = recorder;
  }

  async resume(client: TRPCClient<TRouter> | TRPCUntypedClient<TRouter>): Promise<ResumedCall[]> {
    const { store, namespace } = this.#recorder.o;
    const ns = namespace();
    if (ns === undefined || !store) return [];
    const untyped = client instanceof TRPCUntypedClient ? client : getUntypedClient(client);
    const calls =
      (
        await this.#recorder.access.wait(
          'list',
          storeCall(() => store.list(ns)),
        )
      )?.value ?? [];
    return Promise.all(
      calls.map((call) => {
        let running = this.#resuming.get(call.key);
        if (!running) {
          running = this.#resumeOne(untyped, ns, call).finally(() => this.#resuming.delete(call.key));
          this.#resuming.set(call.key, running);
        }
        return running;
      }),
    );
  }

  async #resumeOne(untyped: TRPCUntypedClient<TRouter>, ns: string, call: PendingCall): Promise<ResumedCall> {
    const recorder = this.#recorder;
    let input: unknown;
    try {
      input = recorder.o.serializer.deserialize(JSON.parse(call.input));
    } catch (error) {
      await recorder.forgetWithin(ns, call.key);
      return { status: 'failed', call, input: undefined, error };
    }
    if (!isValidKey(call.key)) {
      // A stored entry damaged outside this link: it cannot be sent under its key, so it is never sent.
      await recorder.forgetWithin(ns, call.key);
      return { status: 'failed', call, input, error: new TypeError(`stored key ${keyText(call.key)} is not a key`) };
    }
    if (!recorder.o.isGuarded(call.path)) {
      // No longer keyed (the app's `procedures` changed): a re-send would carry no key, so it is never sent.
      await recorder.forgetWithin(ns, call.key);
      return {
        status: 'failed',
        call,
        input,
        error: new Error(`${call.path} is not in pendingCallsLink's procedures`),
      };
    }
    return withLock(keyLockName(ns, call.key), async (): Promise<ResumedCall> => {
      if (recorder.o.isExpired(call.firstSentAt)) {
        await recorder.forgetWithin(ns, call.key);
        return { status: 'expired', call, input };
      }
      const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
      const context: OperationContext = {
        idempotencyKey: call.key,
        idempotencyFirstSentAt: call.firstSentAt,
        idempotencyInfo: info,
      };
      try {
        const data = await untyped.mutation(call.path, input, { context });
        return { status: 'succeeded', call, input, data, replayed: info.replayed };
      } catch (error) {
        return { status: isOutcomeUnknown(error) ? 'unknown' : 'failed', call, input, error };
      }
    });
  }
}
