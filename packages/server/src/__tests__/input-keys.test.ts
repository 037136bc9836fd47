import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { IdempotencyContext, IdempotencyOptions } from '../index.js';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { keyRow, paymentsOf } from './dialect-rows.js';
import { expectReason, failure } from './expectations.js';
import { type AppDB, type Ctx, deferred, t, until } from './harness.js';

let seq = 0;
const newOrder = () => `order-${Date.now().toString(36)}-${++seq}`;

const orderInput = z.object({
  orderId: z.string().optional(),
  amount: z.number().int(),
  /** When the client sent this attempt: it changes between retries, so the fingerprint leaves it out. */
  requestedAt: z.string().optional(),
});

/**
 * Orders keyed by their order id (`orders.place`), a procedure whose key function returns whatever the input
 * holds (`orders.loose`), and a header-keyed procedure whose fingerprint covers only the amount (`orders.amend`).
 */
function ordersApp(backend: DialectBackend, opts: Partial<IdempotencyOptions<Ctx, AppDB, boolean>> = {}) {
  // The payments app's instance (scope `user:<userId>`), with procedures of its own.
  const { idempotency, events } = makeDialectApp(backend, opts);
  const control: { runs: number; keys: string[]; gate?: Promise<void> } = { runs: 0, keys: [] };
  const handler = async ({
    ctx,
    input,
  }: {
    ctx: Ctx & { idempotency: IdempotencyContext<AppDB> | null };
    input: { amount: number };
  }) => {
    control.runs++;
    control.keys.push(ctx.idempotency?.key ?? '(none)');
    const db = ctx.idempotency?.db ?? backend.db; // `required: false` and no key: no idempotency
    await db.insertInto('payments').values({ user_id: ctx.userId, amount: input.amount }).execute();
    if (control.gate) await control.gate;
    return { execution: randomUUID(), amount: input.amount };
  };
  const router = t.router({
    orders: t.router({
      place: t.procedure
        .input(orderInput)
        .use(
          idempotency.fromInput({
            key: ({ input }) => input.orderId,
            fingerprint: ({ input }) => ({ amount: input.amount }),
          }),
        )
        .mutation(handler),
      cancel: t.procedure
        .input(orderInput)
        .use(idempotency.fromInput({ key: ({ input }) => input.orderId }))
        .mutation(handler),
      loose: t.procedure
        .input(z.object({ orderId: z.unknown(), amount: z.number().int() }))
        .use(idempotency.fromInput({ key: ({ input }) => input.orderId as string }))
        .mutation(handler),
      amend: t.procedure
        .input(orderInput)
        .use(idempotency.fromInput({ fingerprint: ({ input }) => ({ amount: input.amount }) }))
        .mutation(handler),
    }),
  });
  const caller = (userId = 'u1', headers: Record<string, string> = {}) => router.createCaller({ userId, headers });
  return { idempotency, router, caller, events, control };
}

describe.each(DIALECT_BACKENDS)('keys and fingerprints from the input on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await ordersApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  it('runs a storm of one order id without any header once, and every duplicate gets the same answer', async () => {
    const app = ordersApp(backend);
    const orderId = newOrder();
    const gate = deferred();
    app.control.gate = gate.promise;
    const calls = Array.from({ length: 20 }, (_, i) =>
      app.caller('storm').orders.place({ orderId, amount: 7, requestedAt: `attempt ${i}` }),
    );
    await until(() => app.control.runs === 1);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(app.control.runs).toBe(1);
    expect(app.control.keys).toEqual([orderId]);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await paymentsOf(backend, 'storm')).toEqual([7]);
    expect(await keyRow(backend, orderId)).toMatchObject({ status: 'done' });
  });

  it('does the same in lease mode: one execution for a storm of one order id, a 422 for another amount', async () => {
    const app = ordersApp(backend, { mode: 'lease' });
    const orderId = newOrder();
    const gate = deferred();
    app.control.gate = gate.promise;
    const calls = Array.from({ length: 10 }, (_, i) =>
      app.caller('lease-storm').orders.place({ orderId, amount: 4, requestedAt: `attempt ${i}` }),
    );
    await until(() => app.control.runs === 1);
    gate.resolve();
    const results = await Promise.all(calls);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(app.control.runs).toBe(1);
    await expectReason(app.caller('lease-storm').orders.place({ orderId, amount: 5 }), 'payload_mismatch');
    expect(await paymentsOf(backend, 'lease-storm')).toEqual([4]);
  });

  it('replays when only a field outside the fingerprint changed, and is 422 when the rest differs', async () => {
    const app = ordersApp(backend);
    const orderId = newOrder();
    const first = await app.caller('fp').orders.place({ orderId, amount: 5, requestedAt: '12:00:00' });
    // A retry whose timestamp moved on: the same logical call.
    expect(await app.caller('fp').orders.place({ orderId, amount: 5, requestedAt: '12:00:03' })).toEqual(first);
    const error = await expectReason(
      app.caller('fp').orders.place({ orderId, amount: 6, requestedAt: '12:00:04' }),
      'payload_mismatch',
      'UNPROCESSABLE_CONTENT',
    );
    expect(error.message).toMatch(/orders\.place/);
    expect(app.control.runs).toBe(1);
    // Without a fingerprint function the whole input is covered: a changed timestamp is another payload.
    const cancelId = newOrder();
    await app.caller('fp').orders.cancel({ orderId: cancelId, amount: 5, requestedAt: '12:00:00' });
    await expectReason(
      app.caller('fp').orders.cancel({ orderId: cancelId, amount: 5, requestedAt: '12:00:03' }),
      'payload_mismatch',
    );
  });

  it('keeps input keys scoped: the same order id of two users runs once for each', async () => {
    const app = ordersApp(backend);
    const orderId = newOrder();
    const alice = await app.caller('scope-alice').orders.place({ orderId, amount: 3 });
    const bob = await app.caller('scope-bob').orders.place({ orderId, amount: 3 });
    expect(bob.execution).not.toBe(alice.execution);
    expect(await app.caller('scope-alice').orders.place({ orderId, amount: 3 })).toEqual(alice);
    expect(await app.caller('scope-bob').orders.place({ orderId, amount: 3 })).toEqual(bob);
    expect(app.control.runs).toBe(2);
  });

  it('ignores an Idempotency-Key header on a procedure keyed by its input', async () => {
    const app = ordersApp(backend);
    const orderId = newOrder();
    const first = await app.caller('hdr', { 'idempotency-key': 'header-one' }).orders.place({ orderId, amount: 2 });
    const second = await app.caller('hdr', { 'idempotency-key': 'header-two' }).orders.place({ orderId, amount: 2 });
    expect(second).toEqual(first);
    expect(app.control.keys).toEqual([orderId]);
    expect(await keyRow(backend, 'header-one')).toBeUndefined();
  });

  it('covers the path: one order id on two procedures is a 422, not the other procedure’s answer', async () => {
    const app = ordersApp(backend);
    const orderId = newOrder();
    await app.caller('paths').orders.place({ orderId, amount: 1 });
    await expectReason(app.caller('paths').orders.cancel({ orderId, amount: 1 }), 'payload_mismatch');
  });

  it('refuses an input without a key (400 key_missing) and a key that is not one (400 key_invalid)', async () => {
    const app = ordersApp(backend);
    const missing = await expectReason(app.caller('bad').orders.place({ amount: 1 }), 'key_missing', 'BAD_REQUEST');
    expect(missing.message).toMatch(/orders\.place.*input/);
    for (const orderId of [42, null, '', 'has space', 'é', 'x'.repeat(256)]) {
      const error = await expectReason(app.caller('bad').orders.loose({ orderId, amount: 1 }), 'key_invalid');
      expect(error.code).toBe('BAD_REQUEST');
      expect(error.message).toMatch(/input of orders\.loose/);
    }
    expect(app.control.runs).toBe(0);
  });

  it('runs an input without a key unprotected with required: false', async () => {
    const app = ordersApp(backend, { required: false });
    await app.caller('optional').orders.place({ amount: 1 });
    await app.caller('optional').orders.place({ amount: 1 });
    expect(app.control.runs).toBe(2);
  });

  it('fingerprints the chosen part of a header-keyed call: a new timestamp replays, a new amount is 422', async () => {
    const app = ordersApp(backend);
    const headers = { 'idempotency-key': `amend-${newOrder()}` };
    const first = await app.caller('amend', headers).orders.amend({ amount: 9, requestedAt: 'a' });
    expect(await app.caller('amend', headers).orders.amend({ amount: 9, requestedAt: 'b' })).toEqual(first);
    await expectReason(app.caller('amend', headers).orders.amend({ amount: 8, requestedAt: 'b' }), 'payload_mismatch');
    expect(app.control.runs).toBe(1);
    // It still takes its key from the header.
    const error = await failure(app.caller('amend').orders.amend({ amount: 9 }));
    expect(error.message).toMatch(/Idempotency-Key/);
  });
});
