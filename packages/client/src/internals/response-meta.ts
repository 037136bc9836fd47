import type { OperationContext } from '@trpc/client';
import { parseTokenList } from '@trpc-idempotency/wire';

/**
 * The position of each attempt's operation in its HTTP batch, recorded by `idempotencyHeaders` and read
 * back to interpret `Idempotent-Replayed: b0, b2`. Keyed by the attempt's context object, which the batch
 * links pass along unchanged.
 */
const batchIndexes = new WeakMap<OperationContext, number>();

export function recordBatchIndex(context: OperationContext, index: number): void {
  batchIndexes.set(context, index);
}

interface MetaLike {
  response?: { headers?: { get(name: string): string | null } };
}

/**
 * Whether the server said it replayed this operation's stored result. A streamed response sends its
 * headers before any call resolves, so there the answer is always `false`.
 */
export function wasReplayed(meta: unknown, context: OperationContext): boolean {
  const value = (meta as MetaLike | undefined)?.response?.headers?.get?.('idempotent-replayed')?.trim();
  if (!value) return false;
  if (value === 'true' || value === '?1') return true;
  const index = batchIndexes.get(context);
  if (index === undefined) return false;
  try {
    return parseTokenList(value).includes(`b${index}`);
  } catch {
    return false;
  }
}
