import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CanonicalEncodeError, canonicalEncode } from './canonical-encode.js';
import { fingerprint } from './fingerprint.js';
import { sha256HexOfUtf16, sha256HexOfUtf16WebCrypto } from './sha256.js';

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

describe('the synchronous node:crypto hash and the Web Crypto one (edge runtimes)', () => {
  it('is synchronous for plain data in Node, so a cache hit waits on no crypto job', () => {
    expect(typeof fingerprint('p', { amount: 1 })).toBe('string');
  });

  it('hash the same UTF-16LE bytes, lone surrogates and astral characters included', async () => {
    for (const text of [
      '',
      'a',
      '{s5:inputd1;s4:paths1:p}',
      'caf\u00e9 \uD83D\uDE00',
      '\uD800',
      '\uDFFF\uD800',
      'x'.repeat(5000),
    ]) {
      expect(sha256HexOfUtf16(text)).toBe(await sha256HexOfUtf16WebCrypto(text));
    }
  });
});

describe('fingerprint of non-JSON inputs (what tRPC hands over for FormData and binary bodies)', () => {
  const formOf = (...entries: [string, string | Blob, string?][]) => {
    const data = new FormData();
    for (const [name, value, filename] of entries) {
      if (typeof value === 'string') data.append(name, value);
      else data.append(name, value, filename);
    }
    return data;
  };

  it('differs for FormData whose fields differ', async () => {
    expect(await fingerprint('p', formOf(['amount', '10']))).not.toBe(
      await fingerprint('p', formOf(['amount', '9999'])),
    );
    expect(await fingerprint('p', formOf(['a', '1'], ['b', '2']))).not.toBe(
      await fingerprint('p', formOf(['b', '2'], ['a', '1'])),
    );
    expect(await fingerprint('p', formOf(['a', '1']))).not.toBe(await fingerprint('p', { a: '1' }));
  });

  it('is the same for FormData with equal fields and equal files', async () => {
    const make = () => formOf(['a', '1'], ['f', new Blob(['bytes'], { type: 'text/plain' }), 'f.txt']);
    expect(await fingerprint('p', make())).toBe(await fingerprint('p', make()));
  });

  it('differs for files that differ in bytes, name or type, and for Blobs that differ in bytes or type', async () => {
    const fileForm = (text: string, name: string, type: string) => formOf(['f', new Blob([text], { type }), name]);
    const base = await fingerprint('p', fileForm('abc', 'a.txt', 'text/plain'));
    expect(await fingerprint('p', fileForm('abd', 'a.txt', 'text/plain'))).not.toBe(base);
    expect(await fingerprint('p', fileForm('abc', 'b.txt', 'text/plain'))).not.toBe(base);
    expect(await fingerprint('p', fileForm('abc', 'a.txt', 'text/csv'))).not.toBe(base);
    expect(await fingerprint('p', new Blob(['x']))).not.toBe(await fingerprint('p', new Blob(['y'])));
    expect(await fingerprint('p', new Blob(['x']))).not.toBe(await fingerprint('p', new Blob(['x'], { type: 'a/b' })));
    expect(await fingerprint('p', new File(['x'], 'a'))).not.toBe(await fingerprint('p', new File(['x'], 'b')));
  });

  it('refuses a ReadableStream (octet-stream input): reading it would consume the handler’s input', async () => {
    const stream = new Blob(['abc']).stream();
    await expect(async () => fingerprint('p', stream)).rejects.toThrow(/stream.*cannot be fingerprinted/);
    expect(stream.locked).toBe(false);
  });
});

describe('fingerprint of hostile inputs', () => {
  const nested = (depth: number) => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`) as unknown;

  it('refuses 20 000 nested arrays (a 40 KB body) with a CanonicalEncodeError, not a stack overflow', async () => {
    await expect(async () => fingerprint('p', nested(20_000))).rejects.toThrow(CanonicalEncodeError);
    await expect(async () => fingerprint('p', nested(20_000))).rejects.toThrow(/nested deeper than 100/);
  });

  it('refuses an input deeper than maxDepth, and accepts one at exactly that depth', async () => {
    expect(await fingerprint('p', nested(100), { maxDepth: 100, maxBytes: 1e6 })).toMatch(/^[0-9a-f]{64}$/);
    await expect(async () => fingerprint('p', nested(101), { maxDepth: 100, maxBytes: 1e6 })).rejects.toThrow(
      /nested deeper than 100/,
    );
  });

  it('refuses an input whose encoding is larger than maxBytes: a huge array, a huge string, a large Blob', async () => {
    const limits = { maxDepth: 100, maxBytes: 10_000 };
    for (const input of [new Array(20_000).fill(0), 'x'.repeat(20_000), new Blob([new Uint8Array(20_000)])]) {
      await expect(async () => fingerprint('p', input, limits)).rejects.toThrow(/larger than 10000 bytes/);
    }
    expect(await fingerprint('p', new Array(1000).fill(0), limits)).toMatch(/^[0-9a-f]{64}$/);
  });
});
