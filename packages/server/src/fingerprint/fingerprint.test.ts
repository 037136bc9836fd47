import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalEncode } from './canonical-encode.js';
import { fingerprint } from './fingerprint.js';

describe('fingerprint', () => {
  it('is a 64-character hex SHA-256', async () => {
    expect(await fingerprint('payments.create', { amount: 1 })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is the same for the same path and an equal input written in another key order', async () => {
    expect(await fingerprint('p', { a: 1, b: [1, { c: 2, d: 3 }] })).toBe(
      await fingerprint('p', { b: [1, { d: 3, c: 2 }], a: 1 }),
    );
  });

  it('differs for another path with the same input', async () => {
    expect(await fingerprint('payments.create', { a: 1 })).not.toBe(await fingerprint('payments.refund', { a: 1 }));
  });

  it('differs for a Date and its ISO string', async () => {
    const date = new Date('2024-05-06T00:00:00.000Z');
    expect(await fingerprint('p', { at: date })).not.toBe(await fingerprint('p', { at: date.toISOString() }));
  });

  it('treats a missing input like an undefined one', async () => {
    expect(await fingerprint('p', undefined)).toBe(await fingerprint('p', undefined));
    expect(await fingerprint('p', undefined)).not.toBe(await fingerprint('p', null));
  });

  it('keeps inputs differing only in an unpaired surrogate apart', async () => {
    expect(await fingerprint('p', '\uD800')).not.toBe(await fingerprint('p', '\uDBFF'));
  });

  it('does not let the path and the input run into each other', async () => {
    expect(await fingerprint('ab', 'c')).not.toBe(await fingerprint('a', 'bc'));
  });

  it('hashes the same bytes as the node:crypto UTF-16LE version did, so stored fingerprints still match', async () => {
    const input = { text: 'caf\u00e9 \uD83D\uDE00 \uD800', n: [1, 2.5, -0], at: new Date(0) };
    const before = createHash('sha256')
      .update(canonicalEncode({ path: 'p', input }), 'utf16le')
      .digest('hex');
    expect(await fingerprint('p', input)).toBe(before);
  });
});
