import type { TRPCClient, TRPCLink, TRPCUntypedClient } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import type { PendingCall } from '../pending-storage/pending-call-store.js';

/** How a resumed call ended. */
export type ResumedCall =
  /** It went through: `data` is its result (a replay when the first send had run). */
  | { status: 'succeeded'; call: PendingCall; input: unknown; data: unknown; replayed: boolean }
  /** A definitive error (a decline, a validation error): nothing more will change it; forgotten. */
  | { status: 'failed'; call: PendingCall; input: unknown; error: unknown }
  /** Still no definitive answer (offline): kept for the next `resume()`. */
  | { status: 'unknown'; call: PendingCall; input: unknown; error: unknown }
  /** Older than the server's `ttl`: never sent, forgotten. Tell the user to check before paying again. */
  | { status: 'expired'; call: PendingCall; input: unknown };

/** A link with the calls it keeps: `resume` them on start, `clear` them at sign-out. */
export type PendingCallsLink<TRouter extends AnyRouter> = TRPCLink<TRouter> & {
  /**
   * Re-sends every stored call of the current user with its own key, through `client` (whose links must
   * include this one), and reports how each ended. Tabs coordinate through the Web Locks API: a call is
   * re-sent by one tab at a time, the next one gets the server's replay.
   */
  resume(client: TRPCClient<TRouter> | TRPCUntypedClient<TRouter>): Promise<ResumedCall[]>;
  /** The current user's stored calls. */
  list(): Promise<PendingCall[]>;
  /** Forgets the stored calls of `user` (default: the current one). Call it at sign-out. */
  clear(user?: string): Promise<void>;
};
