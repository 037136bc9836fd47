import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BACKENDS, type Backend, keyRows, openBackend } from '../harness/backends.ts';
import { rawRequest } from '../harness/raw-http.ts';
import { type InputKindsServer, JsonText, startInputKindsServer } from './support/input-kinds-app.ts';

const keyed = () => ({ 'idempotency-key': randomUUID() });
// The scope comes from a JSON header, as from a decoded token claim: JSON escapes can spell any code unit.
const tenant = (escaped: string) => ({ 'x-tenant': `"${escaped}"` });

let tdb: Backend;
let server: InputKindsServer;

// Every backend: the pg pool fast path (SQL literals), Kysely's parameters on pg, PGlite, MariaDB, SQLite, libSQL.
describe.each(BACKENDS)('text scopes and keys on %s', (backendName) => {
  beforeAll(async () => {
    tdb = await openBackend(backendName, inject('pgAdminUrl'));
    server = await startInputKindsServer({ ...tdb.via });
  });

  afterAll(async () => {
    await server?.close();
    await tdb?.drop();
  });

  describe('text that is not well-formed, over HTTP', () => {
    it('stores and replays an input holding lone surrogates and NUL exactly, and tells such inputs apart', async () => {
      const headers = keyed();
      const body = new JsonText('{"s":"a\\ud800b\\u0000c\\udfff"}');
      const first = await server.call('echo', body, headers);
      expect(first.status, first.body).toBe(200);
      expect(first.data?.input).toEqual({ s: 'a\uD800b\u0000c\uDFFF' });
      const again = await server.call('echo', body, headers);
      expect(again.replayed).toBe('true');
      expect(again.data).toEqual(first.data);
      // U+FFFD is what a lossy store would have made of either surrogate: it must be a different input.
      const lossy = await server.call('echo', new JsonText('{"s":"a\\ufffdb\\u0000c\\ufffd"}'), headers);
      expect(lossy.status, lossy.body).toBe(422);
      expect(lossy.reason).toBe('payload_mismatch');
    });

    it('never answers tenants \\ud800, \\udfff and \\ufffd from one row: the lone surrogates get 400, U+FFFD its own run', async () => {
      const headers = keyed();
      const answers: [string, number, unknown][] = [];
      for (const t of ['\\ud800', '\\udfff', '\\ufffd']) {
        const res = await server.call('count', { same: true }, { ...headers, ...tenant(t) });
        answers.push([t, res.status, res.status === 200 ? res.data?.tenant : res.code]);
        if (res.status === 400) expect(res.message).toMatch(/scope.*lone surrogate/);
      }
      expect(answers).toEqual([
        ['\\ud800', 400, 'BAD_REQUEST'],
        ['\\udfff', 400, 'BAD_REQUEST'],
        ['\\ufffd', 200, '\uFFFD'],
      ]);
      expect((await keyRows(tdb.db, { key: headers['idempotency-key'] })).map((r) => r.scope)).toEqual([
        'tenant:\uFFFD',
      ]);
    });

    it('refuses a tenant holding NUL with 400, and stores nothing', async () => {
      const headers = keyed();
      const res = await server.call('count', {}, { ...headers, ...tenant('a\\u0000b') });
      expect(res.status, res.body).toBe(400);
      expect(res.message).toMatch(/scope.*NUL/);
      expect(await keyRows(tdb.db, { key: headers['idempotency-key'] })).toEqual([]);
    });
  });

  describe('keys that are not visible ASCII, over HTTP', () => {
    const raw = (key: Buffer | string) =>
      rawRequest({
        port: server.port,
        path: '/count',
        headers: [['Idempotency-Key', key]],
        body: '{}',
      });

    it('answers 400 key_invalid for NUL, other control bytes, non-ASCII UTF-8 and Latin-1 bytes in the key', async () => {
      const keys: [string, Buffer | string][] = [
        ['NUL inside an SF string', Buffer.from('"ab\u0000cd"', 'latin1')],
        ['a tab inside', Buffer.from('ab\tcd', 'latin1')],
        ['UTF-8 é', Buffer.from('caf\u00e9', 'utf8')],
        ['Latin-1 é', Buffer.from('caf\u00e9', 'latin1')],
        ['an emoji', '😀-key'],
        ['a DEL byte', Buffer.from('ab\u007fcd', 'latin1')],
        ['an escaped non-ASCII in an SF string', '"caf\\u00e9"'],
      ];
      let reachedMiddleware = 0;
      for (const [what, key] of keys) {
        const res = await raw(key);
        expect(res.status, `${what}: ${res.body}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${what}: ${res.body}`).toBeLessThan(500);
        const reason = (res.json as { error?: { data?: { idempotency?: { reason?: string } } } } | undefined)?.error
          ?.data?.idempotency?.reason;
        // Node's HTTP parser refuses some bytes itself (400 without a tRPC body); the rest reach the middleware.
        if (res.json !== undefined) {
          expect(reason, what).toBe('key_invalid');
          reachedMiddleware++;
        }
      }
      expect(reachedMiddleware).toBeGreaterThanOrEqual(4);
    });
  });
});
