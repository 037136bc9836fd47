import { createTRPCClient, httpBatchLink, httpBatchStreamLink, httpLink, TRPCClientError } from '@trpc/client';
import {
  type IdempotencyCallInfo,
  type IdempotencyLinkOptions,
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
  isOutcomeUnknown,
} from '@trpc-idempotency/client';
import { type CallHolder, type HistoryRecorder, recordBatchPositions, recordingLink } from './history-recording.ts';
import type { PaymentsRouter } from './payments-app.ts';

/** What the clients of one test did, summed over every client. */
export interface ClientStats {
  /** Logical calls started. */
  calls: number;
  /** Retries the link sent by itself. */
  linkRetries: number;
  /** HTTP attempts, as the link counted them. */
  attempts: number;
  /** Calls answered with a stored result. */
  replayed: number;
  /** Times the link gave up and the caller sent the call again with the same key. */
  callerResends: number;
  /** The errors the link gave up with, by message prefix. */
  giveUps: Map<string, number>;
}

export const emptyClientStats = (): ClientStats => ({
  calls: 0,
  linkRetries: 0,
  attempts: 0,
  replayed: 0,
  callerResends: 0,
  giveUps: new Map(),
});

/** A tRPC client of the payments router with the real `idempotencyLink` in front of `httpLink`. */
export function createPaymentsClient(opts: {
  url: string;
  stats: ClientStats;
  user?: string;
  link?: Omit<IdempotencyLinkOptions<PaymentsRouter>, 'procedures' | 'onRetry' | 'onSettled'>;
  /**
   * `'batch'`: `httpBatchLink` (several keyed calls per request, `Idempotency-Keys`); `'stream'`:
   * `httpBatchStreamLink` (the same, answered as a stream). Default `'single'`: `httpLink`.
   */
  transport?: 'single' | 'batch' | 'stream';
  /** Records every attempt's answer into this history (scope `user:<user>`, as the payments app scopes). */
  recorder?: HistoryRecorder;
}) {
  const { stats } = opts;
  const user = opts.user ?? 'alice';
  const transport = {
    url: opts.url,
    headers: recordBatchPositions(idempotencyHeaders.with({ 'x-user': user })),
    fetch: idempotencyFetch(),
  };
  return createTRPCClient<PaymentsRouter>({
    links: [
      idempotencyLink<PaymentsRouter>({
        procedures: ['payments.create'],
        ...opts.link,
        onRetry: () => {
          stats.linkRetries++;
        },
        onSettled: (event) => {
          stats.attempts += event.attempts;
          if (event.replayed) stats.replayed++;
        },
      }),
      ...(opts.recorder ? [recordingLink<PaymentsRouter>(opts.recorder, `user:${user}`)] : []),
      opts.transport === 'batch'
        ? httpBatchLink(transport)
        : opts.transport === 'stream'
          ? httpBatchStreamLink(transport)
          : httpLink(transport),
    ],
  });
}

export type PaymentsClient = ReturnType<typeof createPaymentsClient>;
export type PaymentInput = {
  ref: string;
  amount: number;
  delayMs?: number;
  provider?: boolean;
  steps?: boolean;
  decline?: boolean;
};

/** A failure no retry can fix: the test must fail on it rather than loop. */
function isFinal(err: unknown): boolean {
  if (!(err instanceof TRPCClientError)) return false;
  const status = (err.data as { httpStatus?: number } | undefined)?.httpStatus;
  return status !== undefined && status >= 400 && status < 500 && ![408, 409, 429].includes(status);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A send's context: the caller's key once known (a re-send), else the link makes one. */
const sendContext = (key: string | undefined, info: IdempotencyCallInfo, historyCall: CallHolder) =>
  key === undefined
    ? { idempotencyInfo: info, historyCall }
    : { idempotencyKey: key, idempotencyInfo: info, historyCall };

/**
 * One logical payment as an app makes it: the link makes the key and retries; when the link gives up,
 * the caller sends the call again with the same key (a user's "try again"), until `deadline`.
 */
export async function payUntilDone(
  client: PaymentsClient,
  input: PaymentInput,
  stats: ClientStats,
  deadline: number,
  /** The caller's own key; when absent the link makes one, and re-sends reuse it. */
  callerKey?: string,
): Promise<{
  paymentId: string;
  ref: string;
  instance: string;
  chargeId: string | null;
  scope: string;
  run: string;
  key: string;
}> {
  stats.calls++;
  const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
  // The caller's re-sends are the same logical call: one record in the history.
  const historyCall: CallHolder = {};
  let key: string | undefined = callerKey;
  for (;;) {
    try {
      const result = await client.payments.create.mutate(input, { context: sendContext(key, info, historyCall) });
      key ??= info.key;
      if (key === undefined) throw new Error('the link did not report the key it used');
      return { ...result, key };
    } catch (err) {
      key ??= info.key;
      if (isFinal(err) || Date.now() > deadline || key === undefined) throw err;
      stats.callerResends++;
      const label = err instanceof Error ? err.message.slice(0, 60) : String(err);
      stats.giveUps.set(label, (stats.giveUps.get(label) ?? 0) + 1);
      // A person pressing "try again", not a tight loop: the link has already spent its own retries.
      await sleep(250);
    }
  }
}

/**
 * One user action ("Pay") as an app with sessions makes it. The link makes the key and retries. An outcome the
 * client reports unknown is sent again with its key once the user has signed in again; a definitive failure lets
 * the user press "Pay" again, under a new key. Each logical call (one key) records the client's verdict and the
 * action it serves, for the history checker's `failed-but-committed` and `action-twice`.
 */
export async function payAction(
  client: PaymentsClient,
  input: PaymentInput,
  stats: ClientStats,
  deadline: number,
  /** Resolves once the user is signed in again. */
  signedIn: () => Promise<void>,
): Promise<{ run: string; key: string; newKeys: number }> {
  stats.calls++;
  for (let newKeys = 0; ; newKeys++) {
    const info: IdempotencyCallInfo = { attempts: 0, replayed: false, settled: false };
    const historyCall: CallHolder = {};
    const report = (reported: 'succeeded' | 'failed' | 'unknown') =>
      Object.assign(historyCall.record ?? {}, { reported, action: input.ref });
    let key: string | undefined;
    for (;;) {
      try {
        const result = await client.payments.create.mutate(input, { context: sendContext(key, info, historyCall) });
        report('succeeded');
        return { run: result.run, key: key ?? info.key ?? '', newKeys };
      } catch (err) {
        key ??= info.key;
        const unknown = isOutcomeUnknown(err);
        report(unknown ? 'unknown' : 'failed');
        if (Date.now() > deadline) throw err;
        await signedIn();
        await sleep(20);
        if (!unknown || key === undefined) break; // definitive: "Pay" again, a new logical call
        stats.callerResends++;
      }
    }
  }
}
