import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createIdempotency, type IdempotencyOptions } from '../index.js';
import { downstreamKey } from '../middleware/downstream-key.js';
import { parseTableName } from '../store/table-name.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { failure } from './expectations.js';
import { type AppDB, type Ctx, deferred, t, until } from './harness.js';

let keySeq = 0;
const newKey = () => `st-${Date.now().toString(36)}-${++keySeq}`;

/** A provider that honours idempotency keys: one effect per key, whoever calls with it and however often. */
class Provider {
  readonly calls: string[] = [];
  readonly effects = new Map<string, { id: string; step: string }>();
  call(stepKey: string, step: string) {
    this.calls.push(stepKey);
    let effect = this.effects.get(stepKey);
    if (!effect) {
      effect = { id: randomUUID(), step };
      this.effects.set(stepKey, effect);
    }
    return effect;
  }
}

interface StepControl {
  names: string[];
  /** Runs inside step `name`'s function before the provider is called. */
  before?: (name: string) => Promise<void> | void;
  /** Runs inside step `name`'s function after the provider answered. */
  after?: (name: string) => Promise<void> | void;
  /** Touches ctx.idempotency.db before the first step. */
  dbFirst?: boolean;
  runs: number;
}

/** A lease-mode app whose handler runs three durable steps against `provider`, then writes a payment. */
function makeStepsApp(
  backend: { db: Kysely<AppDB>; pool?: pg.Pool | undefined },
  provider: Provider,
  opts: Partial<IdempotencyOptions<Ctx, AppDB, boolean>> = {},
) {
  const control: StepControl = { names: ['reserve', 'charge', 'notify'], runs: 0 };
  const idempotency = createIdempotency({
    db: backend.db,
    pool: backend.pool,
    scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}`,
    mode: 'lease',
    ...opts,
  } as IdempotencyOptions<Ctx, AppDB, true>);
  const pay = t.procedure
    .use(idempotency.middleware)
    .input(z.object({ amount: z.number().int() }))
    .mutation(async ({ ctx, input }) => {
      control.runs++;
      if (control.dbFirst) await ctx.idempotency.db.selectFrom('payments').select('id').execute();
      const effects = [];
      for (const name of control.names) {
        effects.push(
          await ctx.idempotency.step(name, async (stepKey) => {
            await control.before?.(name);
            const effect = provider.call(stepKey, name);
            await control.after?.(name);
            return { ...effect, at: new Date(0) };
          }),
        );
      }
      await ctx.idempotency.db.insertInto('payments').values({ user_id: ctx.userId, amount: input.amount }).execute();
      return { effects };
    });
  const router = t.router({ pay });
  const caller = (key: string, userId = 'u1') => router.createCaller({ userId, headers: { 'idempotency-key': key } });
  return { idempotency, caller, control };
}

const stepKey = (key: string, userId: string, index: number, name: string) =>
  downstreamKey(parseTableName('idempotency_keys'), `user:${userId}`, key, `step:${index}:${name}`);

describe.each(DIALECT_BACKENDS)('durable steps on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeStepsApp(backend, new Provider()).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  const paymentsOf = async (userId: string) =>
    Number(
      (
        await backend.query<{ n: unknown }>(
          `SELECT count(*) AS n FROM payments WHERE user_id = ${backend.text(userId)}`,
        )
      )[0]?.n,
    );

  it('runs each step once with its documented key, and a replay calls no provider', async () => {
    const provider = new Provider();
    const app = makeStepsApp(backend, provider);
    const key = newKey();
    const first = await app.caller(key, 'a').pay({ amount: 1 });
    const keys = await Promise.all(app.control.names.map((n, i) => stepKey(key, 'a', i, n)));
    expect(provider.calls).toEqual(keys);
    expect(new Set(keys).size).toBe(3);
    expect(first.effects.map((e) => e.id)).toEqual(keys.map((k) => provider.effects.get(k)?.id));
    expect(first.effects[0]?.at).toEqual(new Date(0));
    expect(await app.caller(key, 'a').pay({ amount: 1 })).toEqual(first);
    expect(provider.calls).toHaveLength(3);
    expect(await paymentsOf('a')).toBe(1);
  });

  it('a step that throws is not recorded: a retry replays the steps before it, runs it with the same key', async () => {
    const provider = new Provider();
    const app = makeStepsApp(backend, provider);
    const key = newKey();
    let failNext = true;
    app.control.after = (step) => {
      if (step === 'charge' && failNext) {
        failNext = false;
        throw new Error('provider timed out');
      }
    };
    const error = await failure(app.caller(key, 'b').pay({ amount: 1 }));
    expect(error.code).toBe('INTERNAL_SERVER_ERROR');
    expect(await paymentsOf('b')).toBe(0);
    const result = await app.caller(key, 'b').pay({ amount: 1 });
    const [reserve, charge, notify] = await Promise.all(app.control.names.map((n, i) => stepKey(key, 'b', i, n)));
    // reserve ran once (replayed on the retry); charge twice with one key (one effect); notify once.
    expect(provider.calls).toEqual([reserve, charge, charge, notify]);
    expect(provider.effects.size).toBe(3);
    expect(result.effects.map((e) => e.id)).toEqual([reserve, charge, notify].map((k) => provider.effects.get(k!)?.id));
    expect(await paymentsOf('b')).toBe(1);
  });

  it('a step renamed on a retry is an error that names it, on every retry, and runs nothing', async () => {
    const provider = new Provider();
    const app = makeStepsApp(backend, provider);
    const key = newKey();
    app.control.after = (step) => {
      if (step === 'charge') throw new Error('crash after the first step');
    };
    await failure(app.caller(key, 'c').pay({ amount: 1 }));
    const calls = provider.calls.length;
    app.control.after = undefined;
    app.control.names = ['hold', 'charge', 'notify'];
    for (let i = 0; i < 2; i++) {
      const error = await failure(app.caller(key, 'c').pay({ amount: 1 }));
      expect(error.cause?.message).toMatch(
        /step\('hold'\) is step 0 of this call, but the key recorded step 0 as 'reserve'/,
      );
    }
    expect(provider.calls.length).toBe(calls);
    expect(await paymentsOf('c')).toBe(0);
  });

  it('refuses a step after ctx.idempotency.db, and any step in transaction mode, naming the step', async () => {
    const app = makeStepsApp(backend, new Provider());
    app.control.dbFirst = true;
    const error = await failure(app.caller(newKey(), 'd').pay({ amount: 1 }));
    expect(error.cause?.message).toMatch(/step\('reserve'\) was called after ctx\.idempotency\.db/);
    const tx = makeStepsApp(backend, new Provider(), { mode: 'transaction' });
    const txError = await failure(tx.caller(newKey(), 'd').pay({ amount: 1 }));
    expect(txError.cause?.message).toMatch(/step\('reserve'\) needs mode: 'lease'/);
  });

  it.skipIf(name === 'pglite')(
    'a takeover after a holder died during a step replays the completed steps and runs that step with the same key',
    async () => {
      const provider = new Provider();
      const other = backend.another();
      // The holder "dies" with its Kysely (destroyed below); on pg its renewals then fail. Not through the fast path,
      // whose renewal connection lives outside the pool and would go on renewing.
      const stale = makeStepsApp({ db: other.db }, provider, { lease: 400 });
      const fresh = makeStepsApp(backend, provider, { lease: 400, wait: 5_000 });
      const key = newKey();
      const hang = deferred();
      // The holder dies inside "charge" after the provider answered: its effect happened, its record did not.
      stale.control.after = async (step) => {
        if (step === 'charge') await hang.promise;
      };
      const staleCall = stale.caller(key, 'e').pay({ amount: 1 });
      staleCall.catch(() => {});
      await until(() => provider.calls.length === 2);
      await other.db.destroy();
      const result = await fresh.caller(key, 'e').pay({ amount: 1 });
      const [reserve, charge, notify] = await Promise.all(fresh.control.names.map((n, i) => stepKey(key, 'e', i, n)));
      expect(provider.calls).toEqual([reserve, charge, charge, notify]);
      expect(provider.effects.size).toBe(3);
      expect(result.effects.map((e) => e.id)).toEqual(
        [reserve, charge, notify].map((k) => provider.effects.get(k!)?.id),
      );
      hang.resolve();
      await failure(staleCall);
      expect(await paymentsOf('e')).toBe(1);
    },
  );

  it('migrate() adds the steps column to a table made before it, and runs again unchanged', async () => {
    await backend.query('ALTER TABLE idempotency_keys DROP COLUMN steps');
    const app = makeStepsApp(backend, new Provider());
    await app.idempotency.migrate();
    await app.idempotency.migrate();
    await app.caller(newKey(), 'f').pay({ amount: 1 });
    expect(await paymentsOf('f')).toBe(1);
  });
});
