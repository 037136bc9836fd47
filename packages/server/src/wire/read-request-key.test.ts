import { describe, expect, it } from 'vitest';
import { IdempotencyError } from '../errors/idempotency-error.js';
import { readRequestKey } from './read-request-key.js';

const ctxWith = (headers: Record<string, string>) => ({ req: new Request('http://x.test/', { headers }) });

describe('readRequestKey', () => {
  it('reads a lone Idempotency-Key as the key of a single call', () => {
    expect(readRequestKey(ctxWith({ 'Idempotency-Key': '"k1"' }), 0)).toEqual({ key: 'k1', form: 'single' });
  });

  it('applies a lone Idempotency-Key to batch index 0 only', () => {
    expect(readRequestKey(ctxWith({ 'Idempotency-Key': 'k1' }), 1)).toBeUndefined();
  });

  it('takes the Idempotency-Keys entry of the call at batchIndex', () => {
    const ctx = ctxWith({ 'Idempotency-Keys': 'b0="k0", b2="k2"' });
    expect(readRequestKey(ctx, 0)).toEqual({ key: 'k0', form: 'batch' });
    expect(readRequestKey(ctx, 1)).toBeUndefined();
    expect(readRequestKey(ctx, 2)).toEqual({ key: 'k2', form: 'batch' });
  });

  it('prefers the dictionary entry, falling back to Idempotency-Key for index 0 when the dictionary has none', () => {
    const both = ctxWith({ 'Idempotency-Keys': 'b0="from-dict", b1="k1"', 'Idempotency-Key': 'lone' });
    expect(readRequestKey(both, 0)).toEqual({ key: 'from-dict', form: 'batch' });
    const withoutZero = ctxWith({ 'Idempotency-Keys': 'b1="k1"', 'Idempotency-Key': 'lone' });
    expect(readRequestKey(withoutZero, 0)).toEqual({ key: 'lone', form: 'single' });
  });

  it('returns undefined when the request carries no key', () => {
    expect(readRequestKey(ctxWith({}), 0)).toBeUndefined();
    expect(readRequestKey({}, 0)).toBeUndefined();
  });

  it('throws key_invalid for a malformed header even when it has no entry for this call', () => {
    expect(() => readRequestKey(ctxWith({ 'Idempotency-Keys': 'b0="ok", b1=bad' }), 5)).toThrow(IdempotencyError);
    expect(() => readRequestKey(ctxWith({ 'Idempotency-Key': '"unterminated' }), 0)).toThrow(/unterminated/);
  });

  it('reads each request correctly when batches with different headers alternate', () => {
    const a = ctxWith({ 'Idempotency-Keys': 'b0="a0", b1="a1"' });
    const b = ctxWith({ 'Idempotency-Keys': 'b0="b0", b1="b1"' });
    expect(readRequestKey(a, 1)?.key).toBe('a1');
    expect(readRequestKey(b, 1)?.key).toBe('b1');
    expect(readRequestKey(a, 0)?.key).toBe('a0');
  });
});
