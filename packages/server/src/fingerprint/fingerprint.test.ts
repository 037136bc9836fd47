import { describe, expect, it } from 'vitest';
import { fingerprint } from './fingerprint.js';

describe('fingerprint', () => {
  it('is a 64-character hex SHA-256', () => {
    expect(fingerprint('payments.create', { amount: 1 })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is the same for the same path and an equal input written in another key order', () => {
    expect(fingerprint('p', { a: 1, b: [1, { c: 2, d: 3 }] })).toBe(fingerprint('p', { b: [1, { d: 3, c: 2 }], a: 1 }));
  });

  it('differs for another path with the same input', () => {
    expect(fingerprint('payments.create', { a: 1 })).not.toBe(fingerprint('payments.refund', { a: 1 }));
  });

  it('differs for a Date and its ISO string', () => {
    const date = new Date('2024-05-06T00:00:00.000Z');
    expect(fingerprint('p', { at: date })).not.toBe(fingerprint('p', { at: date.toISOString() }));
  });

  it('treats a missing input like an undefined one', () => {
    expect(fingerprint('p', undefined)).toBe(fingerprint('p', undefined));
    expect(fingerprint('p', undefined)).not.toBe(fingerprint('p', null));
  });

  it('keeps inputs differing only in an unpaired surrogate apart', () => {
    expect(fingerprint('p', '\uD800')).not.toBe(fingerprint('p', '\uDBFF'));
  });

  it('does not let the path and the input run into each other', () => {
    expect(fingerprint('ab', 'c')).not.toBe(fingerprint('a', 'bc'));
  });
});
