import { TRPCError } from '@trpc/server';
import type { TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import { describe, expect, it } from 'vitest';
import { DEFAULT_STORED_ERROR_CODES, shouldStoreError } from './error-policy.js';
import { IdempotencyError, toTRPCError } from './idempotency-error.js';

const stored: TRPC_ERROR_CODE_KEY[] = [
  'BAD_REQUEST',
  'PAYMENT_REQUIRED',
  'FORBIDDEN',
  'NOT_FOUND',
  'CONFLICT',
  'PRECONDITION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'UNPROCESSABLE_CONTENT',
];
const notStored: TRPC_ERROR_CODE_KEY[] = [
  'UNAUTHORIZED',
  'TIMEOUT',
  'TOO_MANY_REQUESTS',
  'CLIENT_CLOSED_REQUEST',
  'INTERNAL_SERVER_ERROR',
  'NOT_IMPLEMENTED',
  'BAD_GATEWAY',
  'SERVICE_UNAVAILABLE',
  'GATEWAY_TIMEOUT',
];

describe('shouldStoreError with the default policy', () => {
  for (const code of stored) {
    it(`stores ${code}, a deterministic answer`, () => {
      expect(shouldStoreError(new TRPCError({ code }), DEFAULT_STORED_ERROR_CODES)).toBe(true);
    });
  }
  for (const code of notStored) {
    it(`does not store ${code}, which a retry may not repeat`, () => {
      expect(shouldStoreError(new TRPCError({ code }), DEFAULT_STORED_ERROR_CODES)).toBe(false);
    });
  }

  it('does not store a raw throw', () => {
    expect(shouldStoreError(new Error('boom'), DEFAULT_STORED_ERROR_CODES)).toBe(false);
    expect(shouldStoreError('boom', DEFAULT_STORED_ERROR_CODES)).toBe(false);
  });

  it("never stores the middleware's own errors, even with a code the policy stores", () => {
    const mismatch = toTRPCError(new IdempotencyError('payload_mismatch', 'm'));
    const conflict = toTRPCError(new IdempotencyError('in_progress', 'm'));
    expect(shouldStoreError(mismatch, DEFAULT_STORED_ERROR_CODES)).toBe(false);
    expect(shouldStoreError(conflict, () => true)).toBe(false);
  });

  it('cannot be mutated by a caller', () => {
    expect(Object.isFrozen(DEFAULT_STORED_ERROR_CODES)).toBe(true);
  });
});

describe('shouldStoreError with a custom policy', () => {
  it('uses a list of codes as given', () => {
    expect(shouldStoreError(new TRPCError({ code: 'NOT_FOUND' }), ['CONFLICT'])).toBe(false);
    expect(shouldStoreError(new TRPCError({ code: 'CONFLICT' }), ['CONFLICT'])).toBe(true);
  });

  it('asks a predicate, which sees the TRPCError itself', () => {
    const policy = (error: TRPCError) => error.code === 'FORBIDDEN' && error.message === 'store me';
    expect(shouldStoreError(new TRPCError({ code: 'FORBIDDEN', message: 'store me' }), policy)).toBe(true);
    expect(shouldStoreError(new TRPCError({ code: 'FORBIDDEN', message: 'other' }), policy)).toBe(false);
  });
});
