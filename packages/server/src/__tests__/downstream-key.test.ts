import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TRPCError } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, type IdempotencyContext, type IdempotencyOptions } from '../index.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { type AppDB, type Backend, type Ctx, deferred, killLeaseHolders, openBackend, t, until } from './harness.js';

/**
 * A payment provider as Stripe behaves: idempotency keys belong to the merchant account, whoever the customer. A
 * repeated key with the same parameters replays the first charge; with other parameters it is refused.
 */
class FakeProvider {
  readonly charges: { id: string; amount: number }[] = [];
  /** Every key it was sent, repeats included. */
  readonly keys: string[] = [];
  readonly #byKey = new Map<string, { params: string; chargeId: string }>();

  charge(key: string, params: { amount: number }): string {
    this.keys.push(key);
    const text = JSON.stringify(params);
    const earlier = this.#byKey.get(key);
    if (earlier) {
      if (earlier.params !== text) {
        throw new Error(
          'Keys for idempotent requests can only be used with the same parameters they were first used with',
        );
      }
      return earlier.chargeId;
    }
    const id = `ch_${this.charges.length + 1}`;
    this.charges.push({ id, amount: params.amount });
    this.#byKey.set(key, { params: text, chargeId: id });
    return id;
  }
}

/** The key a handler passes to the provider. */
type KeyOf = (idempotency: IdempotencyContext<AppDB>) => string | Promise<string>;

/** A checkout that charges the provider, then records the order through `ctx.idempotency.db`. */
function checkoutApp(
  backend: { db: Kysely<AppDB>; pool: pg.Pool | undefined },
  provider: FakeProvider,
  opts: Partial<IdempotencyOptions<Ctx, AppDB, true>> = {},
  keyOf: KeyOf = (idempotency) => idempotency.downstreamKey(),
) {
  const seen: { key: string; takeover: boolean }[] = [];
  const hooks: { afterCharge?: () => Promise<void> | void } = {};
  const idempotency = createIdempotency({
    db: backend.db,
    pool: backend.pool,
    scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}`,
    cache: false,
    ...opts,
  });
  const router = t.router({
    checkout: t.procedure
      .use(idempotency.middleware)
      .input(z.object({ amount: z.number().int() }))
      .mutation(async ({ ctx, input }) => {
        const key = await keyOf(ctx.idempotency);
        seen.push({ key, takeover: ctx.idempotency.takeover });
        const chargeId = provider.charge(key, { amount: input.amount });
        await hooks.afterCharge?.();
        await ctx.idempotency.db
          .insertInto('payments')
          .values({ user_id: ctx.userId, amount: input.amount, note: chargeId })
          .execute();
        return { chargeId };
      }),
  });
  return { idempotency, router, seen, hooks };
}

describe('the downstream key, over HTTP on Postgres', () => {
  let backend: Backend;
  let provider: FakeProvider;
  let app: ReturnType<typeof checkoutApp>;
  let url: string;
  let close: () => void;

  beforeAll(async () => {
    backend = await openBackend('pg-fast');
    provider = new FakeProvider();
    app = checkoutApp(backend, provider);
    await app.idempotency.migrate();
    const server = createHTTPServer({
      router: app.router,
      createContext: ({ req }: { req: IncomingMessage }) => ({
        userId: String(req.headers['x-user']),
        headers: req.headers as Record<string, string>,
      }),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => server.close();
  });
  afterAll(async () => {
    close?.();
    await backend?.close();
  });

  const checkout = async (user: string, key: string, amount: number) => {
    const response = await fetch(`${url}/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user': user, 'idempotency-key': key },
      body: JSON.stringify({ amount }),
    });
    const body = (await response.json()) as { result?: { data: { chargeId: string } }; error?: unknown };
    return { status: response.status, chargeId: body.result?.data.chargeId };
  };

  it('gives two users who send the same key (a guest checkout of the same amount) a charge each', async () => {
    const before = provider.charges.length;
    const alice = await checkout('alice', 'checkout-1', 1500);
    const bob = await checkout('bob', 'checkout-1', 1500);
    expect([alice.status, bob.status]).toEqual([200, 200]);
    expect(bob.chargeId).not.toBe(alice.chargeId);
    expect(provider.charges.length - before).toBe(2);
  });

  it('charges the second user of the same key even when the amounts differ', async () => {
    const alice = await checkout('alice', 'checkout-2', 1000);
    const bob = await checkout('bob', 'checkout-2', 2500);
    expect([alice.status, bob.status]).toEqual([200, 200]);
    expect(provider.charges.find((c) => c.id === bob.chargeId)?.amount).toBe(2500);
  });

  it('sends the same downstream key on a retry after the handler failed, so the provider charges once', async () => {
    const before = provider.charges.length;
    let failures = 1;
    app.hooks.afterCharge = () => {
      if (failures-- > 0) throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: 'lost after the charge' });
    };
    try {
      const seenBefore = app.seen.length;
      expect((await checkout('carol', 'retry-1', 700)).status).toBe(500);
      const retried = await checkout('carol', 'retry-1', 700);
      expect(retried.status).toBe(200);
      const [first, second] = app.seen.slice(seenBefore);
      expect(second?.key).toBe(first?.key);
      expect(provider.charges.length - before).toBe(1);
      expect(retried.chargeId).toBe(provider.charges.at(-1)?.id);
    } finally {
      app.hooks.afterCharge = undefined;
    }
  });

  // The docs once said to pass the key.
  it('is what the raw key is not: unique at a provider that keys per account', async () => {
    const raw = checkoutApp(backend, provider, {}, (idempotency) => idempotency.key);
    const call = (user: string, amount: number) =>
      raw.router.createCaller({ userId: user, headers: { 'idempotency-key': 'raw-1' } }).checkout({ amount });
    const alice = await call('erin', 1500);
    // Same parameters: the provider replays the first user's charge, and the second order is "paid" for free.
    expect(await call('frank', 1500)).toEqual(alice);
    // Other parameters: the second user's payment fails.
    await expect(call('grace', 2500)).rejects.toThrow(/same parameters/);
  });
});

describe('the downstream key across a lease takeover (Postgres, two instances)', () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend('pg-general');
    await createIdempotency({ db: backend.db, scope: () => 'x' }).migrate();
  });
  afterAll(() => backend?.close());

  it('is the same for the instance that took over a dead holder’s claim, so the provider charges once', async () => {
    const provider = new FakeProvider();
    const stale = checkoutApp(backend, provider, { mode: 'lease' });
    const fresh = checkoutApp(backend.another(), provider, { mode: 'lease' });
    const gate = deferred();
    let charged = 0;
    stale.hooks.afterCharge = async () => {
      charged++;
      await gate.promise;
    };
    const caller = (app: typeof stale) =>
      app.router.createCaller({ userId: 'dave', headers: { 'idempotency-key': 'lease-1' } });
    const staleCall = caller(stale).checkout({ amount: 900 });
    staleCall.catch(() => {});
    await until(() => charged === 1);
    // The holder's process dies: its connection (and the lock that proved it alive) goes, its lease runs out.
    await killLeaseHolders(backend);
    await backend.query(`UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE key = 'lease-1'`);
    const result = await caller(fresh).checkout({ amount: 900 });
    gate.resolve();
    await staleCall.catch(() => {});
    expect(fresh.seen).toEqual([{ key: stale.seen[0]?.key, takeover: true }]);
    expect(provider.charges).toHaveLength(1);
    expect(result.chargeId).toBe(provider.charges[0]?.id);
  });
});

/** Pinned: a change would make a call retried across a deploy send another key, and the provider charge twice. */
const ALICE_FORM_1 = 'ee8f858b86f2be6474ab413f85855b87a3edc042ce0a419dc9f71e98323e078e';
const ALICE_FORM_1_REFUND = 'cbdc23cb1fc1fc978a0584cf2bdb20f77c66504ca75a46d5cfca10f554291447';

describe.each(DIALECT_BACKENDS)('the downstream key on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
  });
  afterAll(() => backend?.close());

  /** Answers the call's downstream keys for each purpose. */
  const keysApp = (table?: string) => {
    const idempotency = createIdempotency({
      db: backend.db,
      pool: backend.pool,
      scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}`,
      ...(table ? { table } : {}),
    });
    const router = t.router({
      keys: t.procedure
        .use(idempotency.middleware)
        .input(z.array(z.string()))
        .mutation(({ ctx, input }) =>
          Promise.all([ctx.idempotency.downstreamKey(), ...input.map((p) => ctx.idempotency.downstreamKey(p))]),
        ),
    });
    const call = (user: string, key: string, purposes: string[] = []) =>
      router.createCaller({ userId: user, headers: { 'idempotency-key': key } }).keys(purposes);
    return { idempotency, call };
  };

  it('is the same for one table, scope and key on any dialect, and differs per purpose, scope and table', async () => {
    const app = keysApp();
    await app.idempotency.migrate();
    expect(await app.call('alice', 'form-1', ['refund', ''])).toEqual([
      ALICE_FORM_1,
      ALICE_FORM_1_REFUND,
      ALICE_FORM_1,
    ]);
    const [bob] = await app.call('bob', 'form-1');
    const other = keysApp('other_keys');
    await other.idempotency.migrate();
    const [otherTable] = await other.call('alice', 'form-1');
    expect(new Set([ALICE_FORM_1, bob, otherTable]).size).toBe(3);
    for (const key of [bob, otherTable]) expect(key).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('the downstream key as the docs describe it', () => {
  it('is the hex SHA-256 of the UTF-8 JSON text of [domain, table, scope, key, purpose]', () => {
    const documented = (...parts: string[]) =>
      createHash('sha256')
        .update(JSON.stringify(['trpc-idempotency downstream key v1', ...parts]))
        .digest('hex');
    expect(documented('idempotency_keys', 'user:alice', 'form-1', '')).toBe(ALICE_FORM_1);
    expect(documented('idempotency_keys', 'user:alice', 'form-1', 'refund')).toBe(ALICE_FORM_1_REFUND);
  });
});
