import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from '@trpc/client';
import {
  getIdempotencyReason,
  type IdempotencyCallInfo,
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
} from '@trpc-idempotency/client';
import { describe, expect, test } from 'vitest';
import { countRows } from '../harness/backends.ts';
import { PaymentsFixture } from '../harness/in-process-server.ts';
import type { PaymentsRouter } from '../harness/payments-app.ts';

/** Every request a client sent: its key headers (name: value), and its procedure paths. */
interface Sent {
  keyHeaders: string[];
  paths: string;
}

/**
 * A client as an app builds one for a procedure keyed by its input: `orders.place` is `inputKeyed`. Its fetch
 * records the key headers of each request; with `loseFirstAnswer`, the first answer is lost after the server
 * committed it (the connection dies on the way back), so the link must retry.
 */
function orderClient(
  url: string,
  user: string,
  sent: Sent[],
  opts: { loseFirstAnswer?: boolean; batch?: boolean } = {},
) {
  let requests = 0;
  const recording: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    const keyHeaders = [...headers].filter(([name]) => name.startsWith('idempotency-key')).map((h) => h.join(': '));
    sent.push({ keyHeaders, paths: new URL(String(input)).pathname.split('/').pop() ?? '' });
    const response = await fetch(input, init);
    if (opts.loseFirstAnswer && requests++ === 0) {
      await response.arrayBuffer();
      throw new TypeError('fetch failed: the connection closed before the answer arrived');
    }
    return response;
  };
  const transport = { url, headers: idempotencyHeaders.with({ 'x-user': user }), fetch: idempotencyFetch(recording) };
  return createTRPCClient<PaymentsRouter>({
    links: [
      idempotencyLink<PaymentsRouter>({
        procedures: ['payments.create'],
        inputKeyed: ['orders.place'],
        baseDelayMs: 20,
        budget: false,
      }),
      opts.batch ? httpBatchLink(transport) : httpLink(transport),
    ],
  });
}

const newInfo = (): IdempotencyCallInfo => ({ attempts: 0, replayed: false, settled: false });

describe.each(['pg-pool', 'mariadb', 'sqlite'] as const)('keys from the input over HTTP on %s', (backendName) => {
  const fixture = new PaymentsFixture();
  fixture.use(backendName, { handlerDelayMs: 300 });

  test('a storm of one order id from 8 clients without any header runs once, and every client gets the same answer', async () => {
    const orderId = `storm-${backendName}`;
    const sent: Sent[] = [];
    const clients = Array.from({ length: 8 }, (_, i) =>
      orderClient(fixture.server.url, 'alice', sent, { loseFirstAnswer: i === 0 }),
    );
    const before = fixture.server.counters.executions;
    const infos: IdempotencyCallInfo[] = [];
    const calls = clients.flatMap((client, c) =>
      Array.from({ length: 4 }, (_, i) => {
        const info = newInfo();
        infos.push(info);
        // Each attempt of each client stamps its own time: outside the fingerprint.
        const sentAt = new Date(Date.now() + c * 4 + i).toISOString();
        return client.orders.place.mutate({ orderId, amount: 25, sentAt }, { context: { idempotencyInfo: info } });
      }),
    );
    const answers = await Promise.all(calls);

    expect(fixture.server.counters.executions - before).toBe(1);
    expect(await countRows(fixture.backend.db, 'ledger', orderId)).toBe(1);
    expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1);
    expect(answers[0]).toMatchObject({ orderId, amount: 25, scope: 'user:alice' });
    // No request carried a key; the client whose first answer was lost retried, and got the replay.
    expect(sent.every((s) => s.keyHeaders.length === 0)).toBe(true);
    expect(sent.length).toBeGreaterThanOrEqual(33);
    expect(infos.some((info) => info.attempts === 2 && info.replayed)).toBe(true);
  });

  test('the same order id with another amount is a 422 payload_mismatch, never retried', async () => {
    const orderId = `mismatch-${backendName}`;
    const sent: Sent[] = [];
    const client = orderClient(fixture.server.url, 'alice', sent);
    await client.orders.place.mutate({ orderId, amount: 10, sentAt: 'first', delayMs: 0 });
    const info = newInfo();
    const error = await client.orders.place
      .mutate({ orderId, amount: 11, sentAt: 'second', delayMs: 0 }, { context: { idempotencyInfo: info } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(TRPCClientError);
    expect(getIdempotencyReason(error)).toBe('payload_mismatch');
    expect((error as TRPCClientError<PaymentsRouter>).data?.httpStatus).toBe(422);
    expect(info.attempts).toBe(1);
    expect(await countRows(fixture.backend.db, 'ledger', orderId)).toBe(1);
  });

  test('an order id is scoped per user: the same id of another user runs for that user, with its own answer', async () => {
    const orderId = `scoped-${backendName}`;
    const sent: Sent[] = [];
    const input = { orderId, amount: 5, sentAt: 'now', delayMs: 0 };
    const alice = await orderClient(fixture.server.url, 'alice', sent).orders.place.mutate(input);
    const bob = await orderClient(fixture.server.url, 'bob', sent).orders.place.mutate(input);
    expect(alice.scope).toBe('user:alice');
    expect(bob.scope).toBe('user:bob');
    expect(bob.run).not.toBe(alice.run);
    expect(await orderClient(fixture.server.url, 'bob', sent).orders.place.mutate(input)).toEqual(bob);
    expect(await countRows(fixture.backend.db, 'ledger', orderId)).toBe(2);
  });

  test('in one httpBatchLink batch, copies of one order id run once beside header-keyed calls, which keep their keys', async () => {
    const orderId = `batch-${backendName}`;
    const sent: Sent[] = [];
    const client = orderClient(fixture.server.url, 'alice', sent, { batch: true });
    const before = fixture.server.counters.executions;
    const [placed, paid, again, paidToo] = await Promise.all([
      client.orders.place.mutate({ orderId, amount: 8, sentAt: 'a', delayMs: 0 }),
      client.payments.create.mutate({ ref: `${orderId}-pay-1`, amount: 1 }),
      client.orders.place.mutate({ orderId, amount: 8, sentAt: 'b', delayMs: 0 }),
      client.payments.create.mutate({ ref: `${orderId}-pay-2`, amount: 2 }),
    ]);
    expect(again).toEqual(placed);
    expect(paid.ref).toBe(`${orderId}-pay-1`);
    expect(paidToo.ref).toBe(`${orderId}-pay-2`);
    expect(fixture.server.counters.executions - before).toBe(3);
    expect(await countRows(fixture.backend.db, 'ledger', orderId)).toBe(1);
    // One request; only the header-keyed calls (batch positions 1 and 3) carry keys.
    expect(sent).toHaveLength(1);
    expect(sent[0]!.paths.split(',')).toHaveLength(4);
    expect(sent[0]!.keyHeaders).toEqual([expect.stringMatching(/^idempotency-keys: b1="[^"]+", b3="[^"]+"$/)]);
  });
});
