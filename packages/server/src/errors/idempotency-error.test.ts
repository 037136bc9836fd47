import { TRPCError } from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import { describe, expect, it } from 'vitest';
import { IdempotencyError, type IdempotencyReason, isIdempotencyError, toTRPCError } from './idempotency-error.js';

describe('toTRPCError', () => {
  const table: [IdempotencyReason, TRPCError['code'], number][] = [
    ['key_missing', 'BAD_REQUEST', 400],
    ['key_invalid', 'BAD_REQUEST', 400],
    ['payload_mismatch', 'UNPROCESSABLE_CONTENT', 422],
    ['in_progress', 'CONFLICT', 409],
    ['store_unavailable', 'SERVICE_UNAVAILABLE', 503],
    ['response_too_large', 'INTERNAL_SERVER_ERROR', 500],
  ];

  for (const [reason, code, status] of table) {
    it(`turns ${reason} into ${code} (HTTP ${status})`, () => {
      const error = toTRPCError(new IdempotencyError(reason, `about ${reason}`));
      expect(error).toBeInstanceOf(TRPCError);
      expect(error.code).toBe(code);
      expect(getHTTPStatusCodeFromError(error)).toBe(status);
    });
  }

  it('keeps the message and the IdempotencyError as cause', () => {
    const original = new IdempotencyError('in_progress', 'still running; retry later', { retryAfterMs: 1500 });
    const error = toTRPCError(original);
    expect(error.message).toBe('still running; retry later');
    expect(error.cause).toBe(original);
  });
});

describe('IdempotencyError', () => {
  it('carries reason, retryAfterMs and an optional cause', () => {
    const cause = new Error('connection refused');
    const error = new IdempotencyError('store_unavailable', 'db down', { retryAfterMs: 1000, cause });
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('IdempotencyError');
    expect(error.reason).toBe('store_unavailable');
    expect(error.retryAfterMs).toBe(1000);
    expect(error.cause).toBe(cause);
  });

  it('has no retryAfterMs property at all when none is given', () => {
    expect(Object.hasOwn(new IdempotencyError('key_missing', 'm'), 'retryAfterMs')).toBe(false);
  });
});

describe('isIdempotencyError across module copies', () => {
  it('recognises an error made by a second copy of the module, as a bundler may load it', async () => {
    const url = new URL('./idempotency-error.ts', import.meta.url);
    url.searchParams.set('copy', '2');
    const copy: typeof import('./idempotency-error.js') = await import(/* @vite-ignore */ url.href);
    const foreign = new copy.IdempotencyError('in_progress', 'still running', { retryAfterMs: 1000 });
    expect(foreign).not.toBeInstanceOf(IdempotencyError);
    expect(isIdempotencyError(foreign)).toBe(true);
    expect(isIdempotencyError(new Error('plain'))).toBe(false);
    expect(isIdempotencyError({ reason: 'in_progress' })).toBe(false);
  });
});
