import type { Operation } from '@trpc/client';
import type { AnyProcedure, AnyRouter } from '@trpc/server';

// A wide record (`AnyRouter`'s) has no paths to list: any string then.
type MutationPathsOf<TRecord, TPrefix extends string> = string extends keyof TRecord
  ? string
  : {
      [K in keyof TRecord & string]: TRecord[K] extends AnyProcedure
        ? TRecord[K]['_def']['type'] extends 'mutation'
          ? `${TPrefix}${K}`
          : never
        : TRecord[K] extends Record<string, unknown>
          ? MutationPathsOf<TRecord[K], `${TPrefix}${K}.`>
          : never;
    }[keyof TRecord & string];

/** The dotted paths of every mutation in a router, nested routers included: `'payments.create'`. */
export type MutationPath<TRouter extends AnyRouter> = MutationPathsOf<TRouter['_def']['record'], ''>;

/**
 * What one logical call went through. Pass an object as `context.idempotencyInfo` and the link fills it in:
 * `key` as soon as the call starts, the rest as attempts go.
 */
export interface IdempotencyCallInfo {
  /** The key every attempt of the call carried. */
  key?: string;
  /** HTTP attempts made so far, the first included. */
  attempts: number;
  /** Whether the server answered with a stored result (`Idempotent-Replayed`); never known for streamed responses. */
  replayed: boolean;
  /** Whether the call has finished, with a result or an error. */
  settled: boolean;
}

/** What `onSettled` gets once a keyed call has finished. */
export interface IdempotencySettledEvent extends Required<IdempotencyCallInfo> {
  op: Operation;
  /** The error the call failed with, if it failed. */
  error?: unknown;
}

declare module '@trpc/client' {
  interface OperationContext {
    /** The call's idempotency key, kept by the caller across reloads or a double-submitted form. */
    idempotencyKey?: string;
    /** Filled in by `idempotencyLink` with the call's attempts and replay flag. */
    idempotencyInfo?: IdempotencyCallInfo;
    /**
     * The key may already have run: an earlier send's outcome is unknown (`pendingCallsLink` sets it when it
     * re-sends a stored call). A refusal that says nothing of the key then leaves the outcome unknown.
     */
    idempotencyOutcomeUnknown?: boolean;
    /** When the call's key was first sent; set by `pendingCallsLink` (and by `resume`, from the stored call). */
    idempotencyFirstSentAt?: number;
  }
}
