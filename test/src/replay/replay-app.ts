import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AnyRouter } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import { createIdempotency, type IdempotencyOptions } from '@trpc-idempotency/server';
import type { Kysely } from 'kysely';
import { countRows } from '../harness/backends.ts';

/** The context of the replay tests' servers: the request (its headers carry the key), the response, the caller. */
export interface ReplayContext {
  req: IncomingMessage;
  res: ServerResponse;
  user: string;
}

/** An idempotency instance on `db`, scoped per user, migrated. */
export async function idempotencyOn(db: Kysely<any>, options: Partial<IdempotencyOptions<ReplayContext, any, true>>) {
  const idempotency = createIdempotency({
    db,
    scope: ({ ctx }: { ctx: ReplayContext }) => `user:${ctx.user}`,
    ...options,
  } as IdempotencyOptions<ReplayContext, any, true>);
  await idempotency.migrate();
  return idempotency;
}

/** Serves `router` over real HTTP on 127.0.0.1 (tRPC's standalone adapter). */
export async function listen(router: AnyRouter) {
  const server = createHTTPServer({
    router,
    createContext: ({ req, res }): ReplayContext => ({ req, res, user: String(req.headers['x-user'] ?? 'u1') }),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes one ledger row for `key` through the call's transaction. */
export async function writeLedger(db: Kysely<any>, key: string, amount: number): Promise<void> {
  await db
    .insertInto('ledger')
    .values({ ref: key, amount, user_id: 'u1', idem_key: key, instance: 'replay' })
    .execute();
}

/** Committed ledger rows of `key`. */
export function ledgerRows(db: Kysely<any>, key: string): Promise<number> {
  return countRows(db, 'ledger', key);
}
