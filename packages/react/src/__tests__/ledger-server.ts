import { type Operation, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';

/**
 * What the network does to one attempt: deliver the answer, lose it after the server committed, or `refuse` it
 * before the key is looked at (the app's auth middleware answering 401 once the session ended).
 */
export type Network = (attempt: number, op: Operation) => 'deliver' | 'lose' | 'refuse';

/**
 * A terminating link that behaves like the idempotent server: the first attempt of a key charges (one
 * ledger row) or, for an input `declines` names, stores a decline (402); later ones replay; a changed input
 * under a used key is a 422. Answers can be lost after the commit, as on a dropped connection.
 */
export function ledgerServer(network: Network = () => 'deliver', declines: (input: unknown) => boolean = () => false) {
  const ledger: { key: string; input: unknown }[] = [];
  const stored = new Map<string, { input: string; id: number | null }>();
  const attempts: Operation[] = [];
  const link: TRPCLink<AnyRouter> =
    () =>
    ({ op }) =>
      observable((observer) => {
        attempts.push(op);
        const fate = network(attempts.length, op);
        const timer = setTimeout(() => {
          if (fate === 'refuse') {
            const body = { error: { code: -32001, message: 'sign in first', data: { httpStatus: 401 } } };
            observer.error(TRPCClientError.from(body, { meta: { response: new Response(null, { status: 401 }) } }));
            return;
          }
          const key = String(op.context.idempotencyKey);
          // Key order does not matter, as in the real server's fingerprint.
          const input = JSON.stringify(op.input, Object.keys(op.input as object).sort());
          let entry = stored.get(key);
          const replayed = entry !== undefined;
          if (entry && entry.input !== input) {
            const body = {
              error: {
                code: -32022,
                message: 'payload mismatch',
                data: { httpStatus: 422, idempotency: { reason: 'payload_mismatch' }, idempotencyAnswer: true },
              },
            };
            observer.error(TRPCClientError.from(body, { meta: { response: new Response(null, { status: 422 }) } }));
            return;
          }
          if (!entry) {
            if (!declines(op.input)) ledger.push({ key, input: op.input });
            entry = { input, id: declines(op.input) ? null : ledger.length };
            stored.set(key, entry);
          }
          if (fate === 'lose') {
            observer.error(TRPCClientError.from(new TypeError('Failed to fetch (answer lost)')));
            return;
          }
          if (entry.id === null) {
            // A stored error: the server's formatter marks it as the key's own answer.
            const data = { httpStatus: 402, idempotencyAnswer: true };
            const body = { error: { code: -32002, message: 'card declined', data } };
            observer.error(TRPCClientError.from(body, { meta: { response: new Response(null, { status: 402 }) } }));
            return;
          }
          const headers = replayed ? { 'idempotent-replayed': 'true' } : undefined;
          observer.next({
            result: { type: 'data', data: { id: entry.id } },
            context: { response: new Response(null, { headers }) },
          });
          observer.complete();
        }, 5);
        return () => clearTimeout(timer);
      });
  return { link, ledger, attempts };
}
