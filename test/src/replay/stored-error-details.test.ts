import { initTRPC, TRPCError } from '@trpc/server';
import { idempotencyErrorFormatter, StoredErrorCause } from '@trpc-idempotency/server';
import { describe, expect, inject, it } from 'vitest';
import { ZodError, z } from 'zod';
import { type BackendName, keyRows, openBackend } from '../harness/backends.ts';
import { idempotencyOn, ledgerRows, listen, type ReplayContext, writeLedger } from './replay-app.ts';

/** A payment provider's refusal, carried as the cause of the app's PAYMENT_REQUIRED. */
class PaymentError extends Error {
  constructor(
    readonly declineCode: string,
    readonly retryAt: Date,
  ) {
    super(`declined: ${declineCode}`);
    this.name = 'PaymentError';
  }
}

/**
 * A stored error is replayed with its cause's details, so an `errorFormatter` composed as the server README shows
 * answers the replay as it answered the first call: `declineCode` read from the cause, and tRPC's `zodError` in
 * the README's form (a replayed cause is a StoredErrorCause, not a ZodError: it carries the issues).
 */
describe.each(['pg-pool', 'mariadb', 'sqlite'] satisfies BackendName[])(
  'a stored error replays its details, on %s',
  (name) => {
    for (const mode of ['transaction', 'lease'] as const) {
      it(`${mode} mode: the replay's formatted error equals the first answer's`, async () => {
        const backend = await openBackend(name, inject('pgAdminUrl'));
        const idempotency = await idempotencyOn(backend.db, { mode, maxResponseBytes: 64 * 1024 });
        const t = initTRPC.context<ReplayContext>().create({
          isDev: false,
          errorFormatter: (opts) => {
            const shape = idempotencyErrorFormatter(opts);
            const { error } = opts;
            const cause = error.cause as { declineCode?: string; retryAt?: Date } | undefined;
            const zodError =
              error.cause instanceof ZodError ||
              (error.cause instanceof StoredErrorCause && error.cause.name === 'ZodError')
                ? z.flattenError(error.cause as ZodError)
                : null;
            return {
              ...shape,
              data: {
                ...shape.data,
                declineCode: cause?.declineCode ?? null,
                retryAt: cause?.retryAt instanceof Date ? cause.retryAt.toISOString() : null,
                zodError: error.code === 'BAD_REQUEST' ? zodError : null,
              },
            };
          },
        });
        let runs = 0;
        const guarded = t.procedure.use(idempotency.middleware);
        const cyclic: Record<string, unknown> = { declineCode: 'cyclic' };
        cyclic.self = cyclic;
        const causes: Record<string, () => unknown> = {
          declined: () => new PaymentError('insufficient_funds', new Date(1_700_000_000_000)),
          cyclic: () => Object.assign(new Error('cyclic'), cyclic),
          huge: () => Object.assign(new Error('huge'), { declineCode: 'huge', blob: 'x'.repeat(100 * 1024) }),
        };
        const router = t.router({
          pay: guarded.input(z.object({ cause: z.string() })).mutation(async ({ ctx, input }) => {
            runs++;
            await writeLedger(ctx.idempotency.db, ctx.idempotency.key, 1);
            throw new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined', cause: causes[input.cause]?.() });
          }),
          order: guarded.input(z.object({ quantity: z.number().int().positive() })).mutation(() => {
            runs++;
            return 'ordered';
          }),
        });
        const server = await listen(router);
        const post = async (path: string, key: string, input: unknown) => {
          const res = await fetch(`${server.url}/${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
            body: JSON.stringify(input),
          });
          return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.json() };
        };
        const firstThenReplay = async (path: string, key: string, input: unknown) => {
          const first = await post(path, key, input);
          const replay = await post(path, key, input);
          expect(replay.replayed, key).toBe('true');
          expect(replay.status).toBe(first.status);
          expect(replay.body, key).toEqual(first.body);
          return first.body.error.data;
        };
        try {
          const declined = await firstThenReplay('pay', `${mode}-declined`, { cause: 'declined' });
          expect(declined).toMatchObject({ code: 'PAYMENT_REQUIRED', declineCode: 'insufficient_funds' });
          expect(declined.retryAt).toBe('2023-11-14T22:13:20.000Z');

          const invalid = await firstThenReplay('order', `${mode}-invalid`, { quantity: -1 });
          expect(invalid.zodError.fieldErrors.quantity).toHaveLength(1);

          // A cause that cannot be stored (a cycle) or would not fit maxResponseBytes is left out: the error is still
          // stored and replayed (code and message), never refused for its cause.
          for (const cause of ['cyclic', 'huge']) {
            const key = `${mode}-${cause}`;
            const first = await post('pay', key, { cause });
            expect(first.body.error.data).toMatchObject({ code: 'PAYMENT_REQUIRED', declineCode: cause });
            const replay = await post('pay', key, { cause });
            expect(replay).toMatchObject({ status: 402, replayed: 'true' });
            expect(replay.body.error.message).toBe('card declined');
            expect(replay.body.error.data.declineCode).toBe(null);
            expect(await keyRows(backend.db, { key })).toHaveLength(1);
            expect(await ledgerRows(backend.db, key)).toBe(0);
          }
          expect(runs).toBe(3); // once per key: the invalid order never reached its handler
        } finally {
          await server.close();
          await backend.drop();
        }
      });
    }
  },
);
