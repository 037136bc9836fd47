import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countUtf8Bytes } from './utf8-bytes.js';

describe('countUtf8Bytes (the count where there is no Buffer: edge runtimes)', () => {
  it("answers what Node's Buffer.byteLength answers, lone surrogates included", () => {
    for (const text of ['', 'a', 'é', '€', '😀', '\uD800', '\uDFFF', 'a\uD800b', '\uDBFF\uDFFF', '\uDC00\uD800']) {
      expect(countUtf8Bytes(text), JSON.stringify(text)).toBe(Buffer.byteLength(text, 'utf8'));
    }
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => countUtf8Bytes(text) === Buffer.byteLength(text, 'utf8')),
    );
  });
});
