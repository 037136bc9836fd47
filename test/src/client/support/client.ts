import { createTRPCClient, httpBatchLink, httpBatchStreamLink, httpLink } from '@trpc/client';
import {
  type IdempotencyCallInfo,
  type IdempotencyLinkOptions,
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
} from '@trpc-idempotency/client';
import type { ClientTestRouter } from './client-test-app.ts';

/** A client of the test app: the idempotency link in front of httpLink or httpBatchLink, as the README shows. */
export function createTestClient(
  url: string,
  opts: {
    batch?: boolean | 'stream';
    user?: string | null;
    link?: Partial<IdempotencyLinkOptions<ClientTestRouter>>;
  } = {},
) {
  const user = opts.user === undefined ? 'u1' : opts.user;
  const headers = idempotencyHeaders.with(user === null ? {} : { 'x-user': user });
  const terminating =
    opts.batch === 'stream'
      ? httpBatchStreamLink({ url, headers, fetch: idempotencyFetch() })
      : opts.batch
        ? httpBatchLink({ url, headers, fetch: idempotencyFetch() })
        : httpLink({ url, headers, fetch: idempotencyFetch() });
  return createTRPCClient<ClientTestRouter>({
    links: [
      idempotencyLink<ClientTestRouter>({
        procedures: ['payments.create', 'payments.refund'],
        // Short waits keep the suite quick; the arithmetic itself is pinned by the client's unit tests.
        baseDelayMs: 50,
        ...opts.link,
      }),
      terminating,
    ],
  });
}

export const newInfo = (): IdempotencyCallInfo => ({ attempts: 0, replayed: false, settled: false });

/** The key a request carried, unwrapped from its SF String. */
export const unquote = (header: string | undefined) => header?.replace(/^"|"$/g, '');
