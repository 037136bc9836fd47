import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { encodeKeyHeader, encodeKeysHeader, parseKeyHeader, parseKeysHeader } from './key-headers.js';

// The wire conformance cases (DESIGN.md, Wire contract), one copy in the repository that the server's tests read too.
const repoRoot = resolve(import.meta.dirname, '../../../..');
const vectorsPath = resolve(repoRoot, 'fixtures/wire-vectors.json');
if (!existsSync(vectorsPath)) {
  throw new Error(`wire-vectors.json not found at ${vectorsPath}: the wire conformance cases are required`);
}

interface KeyCase {
  header?: string;
  repeat?: { char: string; count: number };
  quoted?: boolean;
  key?: string;
  key_length?: number;
  error?: string;
  note?: string;
}
interface BatchCase {
  header: string;
  keys?: Record<string, string>;
  error?: string;
  note?: string;
}
interface EncodeCase {
  key?: string;
  keys?: Record<string, string>;
  header: string;
}
const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8')) as {
  key: KeyCase[];
  batch: BatchCase[];
  encode: EncodeCase[];
};

function headerOf(c: KeyCase): string {
  if (c.header !== undefined) return c.header;
  const raw = c.repeat!.char.repeat(c.repeat!.count);
  return c.quoted ? `"${raw}"` : raw;
}
const toMap = (keys: Record<string, string>) => new Map(Object.entries(keys).map(([i, k]) => [Number(i), k]));

describe('wire vectors: encode', () => {
  test.each(vectors.encode)('encodes $header', (c) => {
    expect(c.key !== undefined ? encodeKeyHeader(c.key) : encodeKeysHeader(toMap(c.keys!))).toBe(c.header);
  });
});

describe('wire vectors: Idempotency-Key', () => {
  test.each(vectors.key.map((c) => [c.note ?? headerOf(c).slice(0, 40), c] as const))('%s', (_, c) => {
    const header = headerOf(c);
    if (c.error) {
      expect(() => parseKeyHeader(header)).toThrow();
      return;
    }
    const key = parseKeyHeader(header);
    if (c.key !== undefined) expect(key).toBe(c.key);
    if (c.key_length !== undefined) expect(key).toHaveLength(c.key_length);
    // What the client sends for that key reads back as the same key.
    expect(parseKeyHeader(encodeKeyHeader(key))).toBe(key);
  });
});

describe('wire vectors: Idempotency-Keys', () => {
  test.each(vectors.batch.map((c) => [c.note ?? c.header, c] as const))('%s', (_, c) => {
    if (c.error) {
      expect(() => parseKeysHeader(c.header)).toThrow();
      return;
    }
    const keys = parseKeysHeader(c.header);
    expect(keys).toEqual(toMap(c.keys!));
    expect(parseKeysHeader(encodeKeysHeader(keys))).toEqual(keys);
  });
});

describe('encoding refuses what the server would reject', () => {
  test('an empty, over-long or non-ASCII key is never put on the wire', () => {
    for (const key of ['', 'k'.repeat(256), 'café', 'a b']) {
      expect(() => encodeKeyHeader(key)).toThrow(/visible ASCII/);
    }
  });
});
