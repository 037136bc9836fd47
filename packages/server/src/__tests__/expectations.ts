import { TRPCError } from '@trpc/server';
import { expect } from 'vitest';
import { IdempotencyError, type IdempotencyReason } from '../index.js';

/** Awaits a call that must fail, and returns its TRPCError. */
export async function failure(promise: Promise<unknown>): Promise<TRPCError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(TRPCError);
    return error as TRPCError;
  }
  throw new Error('expected the call to fail, it succeeded');
}

/** The idempotency reason carried by a TRPCError (what the formatter puts in error.data.idempotency). */
export function reasonOf(error: TRPCError): IdempotencyReason | undefined {
  return error.cause instanceof IdempotencyError ? error.cause.reason : undefined;
}

export async function expectReason(promise: Promise<unknown>, reason: IdempotencyReason, code?: string) {
  const error = await failure(promise);
  expect(reasonOf(error)).toBe(reason);
  if (code) expect(error.code).toBe(code);
  return error;
}
