import { createTRPCClient, httpBatchLink } from '@trpc/client';
import {
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
  type PendingCallStore,
  type PendingCallsLink,
  pendingCallsLink,
} from '@trpc-idempotency/client';
import superjson from 'superjson';
import type { AppRouter } from '../server/router';

export interface DemoClientOptions {
  /** `/api/trpc` in the browser; an absolute URL from Node. */
  url: string;
  /** The fetch the HTTP link sends with, e.g. a `flakyFetch`. */
  fetch: typeof fetch;
  /** Sent as `x-demo-user`: whose ledger this is (the server's idempotency scope is `user:<id>`). */
  userId?: string;
  /** Per-attempt timeout. Default 2000 ms, so the "slow response" fault (3 s) outlasts it. */
  attemptTimeoutMs?: number;
  /** Total attempts per call, the first included. Default 5. */
  attempts?: number;
  /** Backoff ceiling of the first retry. Default 200 ms: a demo should not make you wait. */
  baseDelayMs?: number;
  /** Retry budget shared by the calls of this client; `false` retries without limit. Default: the library's. */
  budget?: false;
  /** Keeps pending payments across reloads (the page passes one; the storm does not). */
  pendingCalls?: PendingCallsLink<AppRouter>;
}

/** The link that keeps pending payments in `store`, per demo user, inputs through superjson like the HTTP link. */
export function createDemoPendingCalls(store: PendingCallStore | undefined, userId = 'demo') {
  return pendingCallsLink<AppRouter>({
    procedures: ['payments.create'],
    store,
    user: () => userId,
    transformer: superjson,
  });
}

/** The demo's tRPC client: pending calls, then the idempotency link, in front of a batching HTTP link. */
export function createDemoClient(options: DemoClientOptions) {
  const userId = options.userId ?? 'demo';
  return createTRPCClient<AppRouter>({
    links: [
      // Hands useIdempotentMutation's key to idempotencyLink and, given a store, keeps the call until answered.
      options.pendingCalls ?? createDemoPendingCalls(undefined, userId),
      idempotencyLink<AppRouter>({
        procedures: ['payments.create'],
        attempts: options.attempts ?? 5,
        attemptTimeoutMs: options.attemptTimeoutMs ?? 2_000,
        baseDelayMs: options.baseDelayMs ?? 200,
        maxDelayMs: 2_000,
        ...(options.budget === false ? { budget: false } : {}),
      }),
      httpBatchLink({
        url: options.url,
        transformer: superjson,
        headers: idempotencyHeaders.with({ 'x-demo-user': userId }),
        // Keeps status and Retry-After of non-tRPC answers (a gateway's 503 page) visible to the link.
        fetch: idempotencyFetch(options.fetch),
      }),
    ],
  });
}

export type DemoClient = ReturnType<typeof createDemoClient>;
