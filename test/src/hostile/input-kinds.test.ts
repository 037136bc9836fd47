import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BACKENDS, type Backend, openBackend } from '../harness/backends.ts';
import { type InputKindsServer, startInputKindsServer } from './support/input-kinds-app.ts';

let tdb: Backend;
let server: InputKindsServer;
let superjsonServer: InputKindsServer;

const keyed = () => ({ 'idempotency-key': randomUUID() });

function form(fields: Record<string, string | Blob | [Blob, string]>): FormData {
  const data = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (Array.isArray(value)) data.append(name, value[0], value[1]);
    else data.append(name, value);
  }
  return data;
}

const file = (text: string, type = 'text/plain') => new Blob([text], { type });

describe.each(BACKENDS)('input kinds on %s', (backendName) => {
  beforeAll(async () => {
    tdb = await openBackend(backendName, inject('pgAdminUrl'));
    server = await startInputKindsServer({ ...tdb.via });
    superjsonServer = await startInputKindsServer({ ...tdb.via, transformer: 'superjson' });
  });

  afterAll(async () => {
    await server?.close();
    await superjsonServer?.close();
    await tdb?.drop();
  });

  describe('FormData inputs on a guarded procedure are fingerprinted by their full content', () => {
    it('answers 422 payload_mismatch, not a replay, when the same key comes back with amount=9999 instead of 10', async () => {
      const headers = keyed();
      const first = await server.call('form', form({ amount: '10' }), headers);
      expect(first.status, first.body).toBe(200);
      const before = server.runs.count;
      const second = await server.call('form', form({ amount: '9999' }), headers);
      expect(second.replayed, second.body).toBeNull();
      expect(second.status, second.body).toBe(422);
      expect(second.reason).toBe('payload_mismatch');
      expect(server.runs.count).toBe(before);
    });

    it('replays the stored result when the same key comes back with the same fields and file', async () => {
      const headers = keyed();
      const make = () => form({ amount: '10', receipt: [file('%PDF-1 bytes'), 'receipt.pdf'] });
      const first = await server.call('form', make(), headers);
      expect(first.status, first.body).toBe(200);
      const again = await server.call('form', make(), headers);
      expect(again.status, again.body).toBe(200);
      expect(again.replayed).toBe('true');
      expect(again.data).toEqual(first.data);
    });

    it('tells apart forms differing only in a file’s bytes, name, type, field order or a repeated field', async () => {
      const base = () => ({ a: '1', f: [file('abc'), 'x.txt'] as [Blob, string] });
      const variants: [string, () => FormData][] = [
        ['file bytes', () => form({ ...base(), f: [file('abd'), 'x.txt'] })],
        ['file name', () => form({ ...base(), f: [file('abc'), 'y.txt'] })],
        ['file type', () => form({ ...base(), f: [file('abc', 'application/pdf'), 'x.txt'] })],
        ['field order', () => form({ f: base().f, a: '1' })],
        [
          'a repeated field',
          () => {
            const data = form(base());
            data.append('a', '1');
            return data;
          },
        ],
        ['a file instead of the same text', () => form({ ...base(), f: [file('abc'), 'blob'] })],
      ];
      for (const [what, variant] of variants) {
        const headers = keyed();
        expect((await server.call('form', form(base()), headers)).status).toBe(200);
        const changed = await server.call('form', variant(), headers);
        expect(changed.status, `${what}: ${changed.body}`).toBe(422);
        expect(changed.reason).toBe('payload_mismatch');
      }
    });
  });

  describe('binary stream inputs (application/octet-stream: File, Blob, bytes) on a guarded procedure', () => {
    it('are refused with 400 before the handler runs, saying why and what to send instead', async () => {
      const before = server.runs.count;
      const res = await server.call('upload', file('amount=10'), keyed());
      expect(res.status, res.body).toBe(400);
      expect(res.code).toBe('BAD_REQUEST');
      expect(res.message).toMatch(/stream.*cannot be fingerprinted.*FormData/);
      expect(server.runs.count).toBe(before);
    });

    it('are never replayed for different bytes under the same key', async () => {
      const headers = keyed();
      await server.call('upload', new Uint8Array([1, 2, 3]), headers);
      const second = await server.call('upload', new Uint8Array([9, 9, 9, 9]), headers);
      expect(second.replayed).toBeNull();
      expect(second.status).not.toBe(200);
    });

    it('still reach an unguarded procedure untouched', async () => {
      const res = await server.call('plainUpload', new Uint8Array(1000).fill(7), {});
      expect(res.status, res.body).toBe(200);
      expect(res.data?.bytes).toBe(1000);
    });
  });

  describe('superjson inputs on a guarded procedure', () => {
    const at = new Date('2026-12-03T10:00:00.000Z');
    const pairs: [string, unknown, unknown][] = [
      ['a Date and its ISO string', { at }, { at: at.toISOString() }],
      ['a Date and its epoch number', { at }, { at: at.getTime() }],
      ['a BigInt and the same number', { n: 10n }, { n: 10 }],
      ['-0 and 0', { n: -0 }, { n: 0 }],
      ['NaN and null', { n: Number.NaN }, { n: null }],
      ['a Set and an array', { s: new Set([1, 2]) }, { s: [1, 2] }],
      ['a Map and an object', { m: new Map([['a', 1]]) }, { m: { a: 1 } }],
      ['undefined and null', { u: [undefined] }, { u: [null] }],
    ];

    it.each(pairs)('answers 422 when the same key comes back with %s swapped', async (_what, a, b) => {
      const headers = keyed();
      const first = await superjsonServer.call('count', a, headers);
      expect(first.status, first.body).toBe(200);
      const second = await superjsonServer.call('count', b, headers);
      expect(second.status, second.body).toBe(422);
      expect(second.reason).toBe('payload_mismatch');
    });

    it('replays for the same Map and Set in another order and with undefined properties left out', async () => {
      const headers = keyed();
      const first = await superjsonServer.call(
        'count',
        {
          m: new Map([
            ['a', 1],
            ['b', 2],
          ]),
          s: new Set([1, 2]),
          u: undefined,
          at,
        },
        headers,
      );
      expect(first.status, first.body).toBe(200);
      const again = await superjsonServer.call(
        'count',
        {
          s: new Set([2, 1]),
          at: new Date(at.getTime()),
          m: new Map([
            ['b', 2],
            ['a', 1],
          ]),
        },
        headers,
      );
      expect(again.status, again.body).toBe(200);
      expect(again.replayed).toBe('true');
      expect(again.data).toEqual(first.data);
    });
  });
});
