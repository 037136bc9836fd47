import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BACKENDS, type Backend, openBackend } from '../harness/backends.ts';
import { type InputKindsServer, JsonText, startInputKindsServer } from './support/input-kinds-app.ts';

let tdb: Backend;
let servers: { json: InputKindsServer; superjson: InputKindsServer };

// JSON.stringify recurses, so the deep body is written as text.
const nested = (depth: number) => new JsonText(`${'['.repeat(depth)}${']'.repeat(depth)}`);
const keyed = () => ({ 'idempotency-key': randomUUID() });

describe.each(BACKENDS)('deep and huge inputs on %s', (backendName) => {
  beforeAll(async () => {
    tdb = await openBackend(backendName, inject('pgAdminUrl'));
    // A small size limit, so "huge" stays cheap on a shared machine.
    const idempotency = { maxInputBytes: 100_000, wait: 5000 };
    servers = {
      json: await startInputKindsServer({ ...tdb.via, idempotency }),
      superjson: await startInputKindsServer({ ...tdb.via, transformer: 'superjson', idempotency }),
    };
  });

  afterAll(async () => {
    await Promise.all(Object.values(servers ?? {}).map((s) => s.close()));
    await tdb?.drop();
  });

  describe.each(['json', 'superjson'] as const)('deep and huge inputs through %s over HTTP', (kind) => {
    it('answers 400 with a clear message, never a 500, for a 40 KB body of 20 000 nested arrays', async () => {
      const server = servers[kind];
      const before = server.runs.count;
      const res = await server.call('count', nested(20_000), keyed());
      expect(res.status, res.body.slice(0, 300)).toBe(400);
      expect(res.code).toBe('BAD_REQUEST');
      // superjson's own deserializer recurses and fails first; tRPC answers that with 400 before the middleware runs.
      expect(res.message).toMatch(kind === 'json' ? /nested deeper than 100 levels.*maxInputDepth/ : /call stack/);
      expect(server.runs.count).toBe(before);
    });

    it('accepts an input nested 50 deep and replays it for the same key', async () => {
      const server = servers[kind];
      const headers = keyed();
      const first = await server.call('count', nested(50), headers);
      expect(first.status, first.body.slice(0, 300)).toBe(200);
      const again = await server.call('count', nested(50), headers);
      expect(again.replayed).toBe('true');
      expect(again.data).toEqual(first.data);
    });

    it('answers 413 PAYLOAD_TOO_LARGE for a huge array or a huge string past maxInputBytes', async () => {
      const server = servers[kind];
      for (const input of [new Array(60_000).fill(1), { note: 'x'.repeat(150_000) }]) {
        const res = await server.call('count', input, keyed());
        expect(res.status, res.body.slice(0, 300)).toBe(413);
        expect(res.code).toBe('PAYLOAD_TOO_LARGE');
        expect(res.message).toMatch(/larger than 100000 bytes.*maxInputBytes/);
      }
    });
  });

  describe('hostile bodies that are not one JSON call', () => {
    it('answers 413 for a FormData file past maxInputBytes, before hashing it or running anything', async () => {
      const server = servers.json;
      const before = server.runs.count;
      const form = new FormData();
      form.append('amount', '10');
      form.append('scan', new Blob([new Uint8Array(150_000)]), 'scan.bin');
      const res = await server.call('form', form, keyed());
      expect(res.status, res.body.slice(0, 300)).toBe(413);
      expect(res.message).toMatch(/maxInputBytes/);
      expect(server.runs.count).toBe(before);
    });

    it('answers each call of a batch on its own: the deep one 400, its sibling 200', async () => {
      const server = servers.json;
      const res = await fetch(`${server.url}/count,count?batch=1`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-keys': `b0="${randomUUID()}", b1="${randomUUID()}"`,
        },
        body: `{"0":${'['.repeat(5000)}${']'.repeat(5000)},"1":{"ok":true}}`,
      });
      const calls = (await res.json()) as { result?: unknown; error?: { data?: { httpStatus?: number } } }[];
      expect(calls.map((c) => c.error?.data?.httpStatus ?? 200)).toEqual([400, 200]);
    });

    it('answers 400, not 500, for a body that is not JSON at all', async () => {
      for (const body of ['{"amount":', '\u0000', '[1,2', 'nul']) {
        const res = await servers.json.call('count', new JsonText(body), keyed());
        expect(res.status, `${body}: ${res.body.slice(0, 200)}`).toBe(400);
      }
    });
  });
});
