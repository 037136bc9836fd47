import type { IncomingMessage, ServerResponse } from 'node:http';
import { initTRPC, TRPCError } from '@trpc/server';
import {
  createIdempotency,
  DEFAULT_STORED_ERROR_CODES,
  defaultSerializer,
  idempotencyErrorFormatter,
} from '@trpc-idempotency/server';
import { type Kysely, sql } from 'kysely';
import type { Pool } from 'pg';
import { z } from 'zod';
import { type SqlFamily, sqlFamily } from './sql-family.ts';

/** The request context of the test servers: the Node request/response and the caller, from `x-user`. */
export interface AppContext {
  req: IncomingMessage;
  res: ServerResponse;
  user: string;
}

export interface PaymentsAppOptions {
  /** Kysely on the database holding `idempotency_keys` and `ledger`. */
  db: Kysely<any>;
  /** The raw `pg` pool behind `db`: passed as the middleware's `pool`, it enables the one-round-trip fast path. */
  pool?: Pool;
  /** Idempotency mode. Default `'transaction'`. */
  mode?: 'transaction' | 'lease';
  /** Lease length in ms (lease mode). Default: the package's. */
  lease?: number;
  /** How long a duplicate waits for the original. Default: the package's. */
  wait?: number;
  /** Ms a key is kept. Default: the package's. */
  ttl?: number;
  /** Largest stored result. Default: the package's. */
  maxResponseBytes?: number;
  /** Default handler delay in ms for `payments.create`, overridable per call by `input.delayMs`. Default 0. */
  handlerDelayMs?: number;
  /** Simulated payment provider; when set, `payments.create` with `provider: true` charges through it. */
  providerUrl?: string;
  /** Name of this server instance, returned in results and the `x-instance` header. Default `'main'`. */
  instance?: string;
  /**
   * Called when a handler starts, before any effect: lets a parent process kill the server mid-handler, and the
   * history checker count executions. `run` names this execution; results and ledger rows carry it.
   */
  onEnter?: (info: EnterInfo) => void;
  /** Called when a `payments.create` handler has finished its work and returns (its result not yet stored). */
  onLeave?: (info: { ref: string; key: string; run: string }) => void;
  /**
   * Makes the named user callback throw while `current` names it (the switch is read on every call): for the
   * suite that checks no throwing callback can leak a session, a lock or a mutex. With it, the key is read by a
   * `key` callback of the app's own instead of the middleware's header parsing.
   */
  throwIn?: { current: ThrowingCallback | undefined };
  /** Forwarded to the middleware's `onEvent`. */
  onEvent?: (event: unknown) => void;
  /**
   * Whether a user's session is valid: when set, the app's auth middleware runs before the idempotency middleware
   * and answers 401 UNAUTHORIZED while it is not (the session expired, or the user signed out in another tab).
   */
  signedIn?: (user: string) => boolean;
}

/** What a server reports when a handler starts. */
export interface EnterInfo {
  path: string;
  ref: string | undefined;
  scope: string;
  key: string;
  run: string;
  takeover: boolean;
}

export type ThrowingCallback = 'scope' | 'key' | 'storeErrors' | 'serializer' | 'onEvent';

/** Counters the in-process tests read: how often handlers really ran. */
export interface AppCounters {
  executions: number;
}

/**
 * The ledger's column types per dialect. MySQL's text columns compare byte-exact (binary collation), as keys and
 * scopes do in the key table.
 */
const LEDGER_TYPES: Record<SqlFamily, { id: string; text: string; created: string }> = {
  postgres: { id: 'bigserial', text: 'text', created: 'timestamptz not null default clock_timestamp()' },
  mysql: {
    id: 'bigint auto_increment',
    text: 'varchar(1024) character set utf8mb4 collate utf8mb4_bin',
    created: 'timestamp(6) not null default current_timestamp(6)',
  },
  sqlite: {
    id: 'integer',
    text: 'text',
    created: "integer not null default (CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))",
  },
};

/** The ledger the payments write to; deliberately without a unique constraint, so a duplicate would show. */
export async function createLedger(db: Kysely<any>): Promise<void> {
  const { id, text, created } = LEDGER_TYPES[sqlFamily(db)];
  const t = sql.raw(text);
  await sql`create table if not exists ledger (
    id ${sql.raw(id)} primary key,
    ref ${t} not null,
    amount integer not null,
    user_id ${t} not null,
    scope ${t},
    idem_key ${t} not null,
    run ${t},
    instance ${t} not null,
    created_at ${sql.raw(created)}
  )`.execute(db);
}

/**
 * Inserts a ledger row and returns its id: MySQL 8 has no `INSERT … RETURNING` (MariaDB has), so there the
 * driver's insert id, as a MySQL app would do.
 */
async function insertLedgerRow(db: Kysely<any>, values: Record<string, unknown>): Promise<string> {
  if (sqlFamily(db) === 'mysql') {
    const result = await db.insertInto('ledger').values(values).executeTakeFirstOrThrow();
    return String(result.insertId);
  }
  const row = await db.insertInto('ledger').values(values).returning('id').executeTakeFirstOrThrow();
  return String(row.id);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Builds the payments router the chaos and hostile tests run, in a child process or in the test process. */
export function createPaymentsApp(opts: PaymentsAppOptions) {
  const instance = opts.instance ?? 'main';
  const counters: AppCounters = { executions: 0 };
  // Unique across instances and restarts: the history checker ties answers and ledger rows to executions by it.
  const nextRun = () => `${instance}/${process.pid}/${++counters.executions}`;
  const t = initTRPC.context<AppContext>().create({ errorFormatter: idempotencyErrorFormatter });
  const idempotency = createIdempotency({
    db: opts.db,
    scope: ({ ctx }: { ctx: AppContext }) => {
      if (opts.throwIn?.current === 'scope') throw new Error('scope callback failed');
      return `user:${ctx.user}`;
    },
    ...(opts.throwIn ? throwingCallbacks(opts.throwIn) : {}),
    ...(opts.pool ? { pool: opts.pool } : {}),
    ...(opts.mode ? { mode: opts.mode } : {}),
    ...(opts.lease !== undefined ? { lease: opts.lease } : {}),
    ...(opts.ttl !== undefined ? { ttl: opts.ttl } : {}),
    ...(opts.wait !== undefined ? { wait: opts.wait } : {}),
    ...(opts.maxResponseBytes !== undefined ? { maxResponseBytes: opts.maxResponseBytes } : {}),
    ...(opts.onEvent || opts.throwIn
      ? {
          onEvent: (event: unknown) => {
            if (opts.throwIn?.current === 'onEvent') throw new Error('onEvent callback failed');
            opts.onEvent?.(event);
          },
        }
      : {}),
  });
  const { signedIn } = opts;
  const authed = signedIn
    ? t.procedure.use(({ ctx, next }) => {
        if (!signedIn(ctx.user)) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'sign in again' });
        return next();
      })
    : t.procedure;
  const procedure = authed.use(idempotency.middleware);

  const charge = async (ref: string, key: string | undefined) => {
    const res = await fetch(`${opts.providerUrl}/charge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(key === undefined ? { ref } : { ref, key }),
    });
    if (!res.ok) throw new Error(`provider answered ${res.status}`);
    return ((await res.json()) as { chargeId: string }).chargeId;
  };

  const router = t.router({
    payments: t.router({
      create: procedure
        .input(
          z.object({
            ref: z.string(),
            amount: z.number().int(),
            delayMs: z.number().int().nonnegative().optional(),
            provider: z.boolean().optional(),
            /**
             * Lease mode: three durable steps (reserve, charge, notify) call the provider, each keyed by its step key
             * and once more unkeyed, before the ledger row; `delayMs` is spent inside the steps, after each call.
             */
            steps: z.boolean().optional(),
            /** Decline the payment: a stored PAYMENT_REQUIRED whose message names the run and scope. */
            decline: z.boolean().optional(),
          }),
        )
        .mutation(async ({ ctx, input }) => {
          const { key, scope, takeover } = ctx.idempotency;
          const run = nextRun();
          opts.onEnter?.({ path: 'payments.create', ref: input.ref, scope, key, run, takeover });
          const delay = input.delayMs ?? opts.handlerDelayMs ?? 0;
          let chargeId: string | undefined;
          if (input.steps && opts.providerUrl) {
            const effects: string[] = [];
            for (const step of ['reserve', 'charge', 'notify']) {
              effects.push(
                await ctx.idempotency.step(step, async (stepKey) => {
                  const effect = await charge(`${input.ref}/${step}`, stepKey);
                  await charge(`${input.ref}/${step}`, undefined);
                  // A crash here: the provider acted, the step is not recorded yet.
                  if (delay > 0) await sleep(delay / 3);
                  return effect;
                }),
              );
            }
            chargeId = effects.join(',');
          }
          // After the steps (a step ends the call's transaction, so `db` comes after it).
          const { db } = ctx.idempotency;
          const paymentId = await insertLedgerRow(db, {
            ref: input.ref,
            amount: input.amount,
            user_id: ctx.user,
            scope,
            idem_key: key,
            run,
            instance,
          });
          if (input.provider && opts.providerUrl) {
            // The keyed charge is what the docs recommend; the unkeyed one measures what happens without it.
            chargeId = await charge(input.ref, await ctx.idempotency.downstreamKey());
            await charge(input.ref, undefined);
          }
          if (delay > 0 && !input.steps) await sleep(delay);
          opts.onLeave?.({ ref: input.ref, key, run });
          if (input.decline) {
            // A deterministic error: stored and replayed, the ledger row above rolled back.
            throw new TRPCError({
              code: 'PAYMENT_REQUIRED',
              message: JSON.stringify({ declined: input.ref, run, scope }),
            });
          }
          return { paymentId, ref: input.ref, instance, chargeId: chargeId ?? null, scope, run };
        }),
      /** Echoes any JSON input with a per-execution number: a replay repeats the number, a re-run does not. */
      echo: procedure.input(z.unknown()).mutation(({ ctx, input }) => {
        const run = nextRun();
        const { key, scope, takeover } = ctx.idempotency;
        opts.onEnter?.({ path: 'payments.echo', ref: undefined, scope, key, run, takeover });
        return { user: ctx.user, run: counters.executions, input };
      }),
      /** Writes a ledger row and returns `bytes` characters: for the stored-size limit. */
      blob: procedure
        .input(z.object({ ref: z.string(), bytes: z.number().int().nonnegative() }))
        .mutation(async ({ ctx, input }) => {
          counters.executions++;
          await ctx.idempotency.db
            .insertInto('ledger')
            .values({ ref: input.ref, amount: 0, user_id: ctx.user, idem_key: ctx.idempotency.key, instance })
            .execute();
          return { ref: input.ref, data: 'x'.repeat(input.bytes) };
        }),
    }),
    orders: t.router({
      /**
       * Keyed by the order id in its input, not by a header (`fromInput`); the fingerprint covers the order id and
       * the amount, not `sentAt`, which a client sets on every attempt.
       */
      place: authed
        .input(
          z.object({
            orderId: z.string(),
            amount: z.number().int(),
            sentAt: z.string(),
            delayMs: z.number().int().nonnegative().optional(),
          }),
        )
        .use(
          idempotency.fromInput({
            key: ({ input }) => `order:${input.orderId}`,
            fingerprint: ({ input }) => ({ orderId: input.orderId, amount: input.amount }),
          }),
        )
        .mutation(async ({ ctx, input }) => {
          const { key, scope, takeover, db } = ctx.idempotency;
          const run = nextRun();
          opts.onEnter?.({ path: 'orders.place', ref: input.orderId, scope, key, run, takeover });
          const { orderId: ref, amount } = input;
          const row = { ref, amount, user_id: ctx.user, scope, idem_key: key, run, instance };
          const paymentId = await insertLedgerRow(db, row);
          const delay = input.delayMs ?? opts.handlerDelayMs ?? 0;
          if (delay > 0) await sleep(delay);
          return { paymentId, orderId: ref, amount, instance, scope, run };
        }),
    }),
  });

  const createContext = ({ req, res }: { req: IncomingMessage; res: ServerResponse }): AppContext => {
    res.setHeader('x-instance', instance);
    const user = req.headers['x-user'];
    return { req, res, user: typeof user === 'string' && user ? user : 'alice' };
  };

  return { router, createContext, idempotency, counters };
}

/**
 * The callbacks the fault suite makes throw: each throws while the switch names it, else behaves as the defaults.
 * `key` reads the `Idempotency-Key` header itself (a quoted SF String or a raw token).
 */
function throwingCallbacks(throwIn: { current: ThrowingCallback | undefined }) {
  const fail = (name: ThrowingCallback) => {
    if (throwIn.current === name) throw new Error(`${name} callback failed`);
  };
  return {
    key: ({ ctx }: { ctx: AppContext; batchIndex: number }) => {
      fail('key');
      const header = ctx.req.headers['idempotency-key'];
      if (typeof header !== 'string') return undefined;
      const trimmed = header.trim();
      return trimmed.startsWith('"') && trimmed.endsWith('"') ? trimmed.slice(1, -1) : trimmed;
    },
    storeErrors: (error: TRPCError) => {
      fail('storeErrors');
      return DEFAULT_STORED_ERROR_CODES.includes(error.code);
    },
    serializer: {
      serialize: (value: unknown) => {
        fail('serializer');
        return defaultSerializer.serialize(value);
      },
      deserialize: (payload: unknown) => {
        fail('serializer');
        return defaultSerializer.deserialize(payload);
      },
    },
  };
}

export type PaymentsRouter = ReturnType<typeof createPaymentsApp>['router'];
