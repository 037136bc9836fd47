import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { z } from 'zod';
import { createIdempotency, type IdempotencyEvent, type IdempotencyOptions } from '../index.js';
import type { DialectBackend } from './dialect-backends.js';
import { type AppDB, type Control, type Ctx, deferred, t, until } from './harness.js';

/**
 * The payments router of harness.ts without `RETURNING` (MySQL has none): each execution answers with a fresh
 * id, so a replay repeats it and a second execution would not.
 */
export function makeDialectApp(
  backend: { db: Kysely<AppDB>; pool?: pg.Pool | undefined },
  opts: Partial<IdempotencyOptions<Ctx, AppDB, boolean>> = {},
) {
  const events: IdempotencyEvent[] = [];
  const control: Control = { runs: 0, takeovers: [] };
  const idempotency = createIdempotency({
    db: backend.db,
    // pg-fast's pool: without it the "pg-fast" backend would run the general path like pg-general.
    pool: backend.pool,
    scope: ({ ctx }: { ctx: Ctx }) => `user:${ctx.userId}`,
    onEvent: (e) => events.push(e),
    ...opts,
  } as IdempotencyOptions<Ctx, AppDB, true>);
  const pay = t.procedure
    .use(idempotency.middleware)
    .input(z.object({ amount: z.number().int() }))
    .mutation(async ({ ctx, input }) => {
      control.runs++;
      control.takeovers.push(ctx.idempotency.takeover);
      await ctx.idempotency.db.insertInto('payments').values({ user_id: ctx.userId, amount: input.amount }).execute();
      await control.afterWrite?.(ctx.idempotency.db, ctx.idempotency.key);
      control.atGate = (control.atGate ?? 0) + 1;
      if (control.gate) await control.gate;
      if (control.delayMs) await new Promise((r) => setTimeout(r, control.delayMs));
      if (control.throwAfterWrite) throw control.throwAfterWrite();
      return control.result ? control.result(input) : { execution: randomUUID(), amount: input.amount };
    });
  const router = t.router({ payments: t.router({ create: pay, refund: pay }) });
  const caller = (key: string | undefined, userId = 'u1') =>
    router.createCaller({ userId, headers: key === undefined ? {} : { 'idempotency-key': key } });
  return { idempotency, router, caller, events, control };
}

/**
 * Lease mode, on a dialect whose running holder can die alone (pg, MariaDB): a holder on `backend` runs `key` and
 * waits at its gate after its write; its connection dies and its lease runs out; another instance takes the key
 * over and stores its success. The holder's call is still running: set its `control`, then `release()` it.
 */
export async function takeOverRunningHolder(backend: DialectBackend, key: string, userId: string) {
  const stale = makeDialectApp(backend, { mode: 'lease' });
  const fresh = makeDialectApp(backend.another(), { mode: 'lease' });
  const gate = deferred();
  stale.control.gate = gate.promise;
  const staleCall = stale.caller(key, userId).payments.create({ amount: 4 });
  staleCall.catch(() => {}); // The caller awaits it; a failure before that must not surface as an unhandled rejection.
  await until(() => stale.control.atGate === 1);
  // What proved the holder alive goes with its connection; its lease runs out (by the database's clock).
  await backend.killLeaseHolder(`user:${userId}`, key);
  await backend.query(
    `UPDATE idempotency_keys SET locked_until = ${backend.at(-1000)}
      WHERE ${backend.dialect === 'mysql' ? '`key`' : 'key'} = ${backend.text(key)}`,
  );
  const freshResult = await fresh.caller(key, userId).payments.create({ amount: 4 });
  return { stale, fresh, staleCall, freshResult, release: gate.resolve };
}
