import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BACKENDS, type Backend, countRows, keyRows, openBackend } from '../harness/backends.ts';
import { startPaymentsServer } from '../harness/in-process-server.ts';
import { callRaw } from '../harness/trpc-http.ts';

const LIMIT = 64 * 1024;
let tdb: Backend;
const servers: Record<'transaction' | 'lease', Awaited<ReturnType<typeof startPaymentsServer>>> = {} as never;

const ledgerRows = (ref: string) => countRows(tdb.db, 'ledger', ref);

describe.each(BACKENDS)('oversized results on %s', (backendName) => {
  beforeAll(async () => {
    tdb = await openBackend(backendName, inject('pgAdminUrl'));
    servers.transaction = await startPaymentsServer({ ...tdb.via, maxResponseBytes: LIMIT });
    servers.lease = await startPaymentsServer({ ...tdb.via, mode: 'lease', maxResponseBytes: LIMIT, migrate: false });
  });

  afterAll(async () => {
    await servers.transaction?.close();
    await servers.lease?.close();
    await tdb?.drop();
  });

  describe.each(['transaction', 'lease'] as const)('results above maxResponseBytes (%s mode)', (mode) => {
    const blob = (key: string, ref: string, bytes: number) =>
      callRaw({ port: servers[mode].port, path: 'payments.blob', input: { ref, bytes }, key });

    it('fails with 500 response_too_large, rolls back the handler’s writes, and never replays a truncated result', async () => {
      const key = randomUUID();
      const ref = `big-${mode}`;
      for (let attempt = 0; attempt < 3; attempt++) {
        const res = await blob(key, ref, LIMIT * 2);
        expect(res.status, res.body.slice(0, 300)).toBe(500);
        expect(res.reason).toBe('response_too_large');
        expect(res.data).toBeUndefined();
      }
      expect(await ledgerRows(ref)).toBe(0);
      const rows = await keyRows(tdb.db, { key });
      expect(rows.filter((r) => r.status === 'done')).toEqual([]);
    });

    it('stores and replays a result just under the limit byte for byte', async () => {
      const key = randomUUID();
      const ref = `under-${mode}`;
      const first = await blob(key, ref, LIMIT - 1024);
      expect(first.status, first.body.slice(0, 300)).toBe(200);
      const replay = await blob(key, ref, LIMIT - 1024);
      expect(replay.status).toBe(200);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toBe(first.body);
      expect(await ledgerRows(ref)).toBe(1);
    });

    it('either replays the full result or refuses it, for any size around the limit', async () => {
      let stored = 0;
      let refused = 0;
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: LIMIT - 2048, max: LIMIT + 2048 }), async (bytes) => {
          const key = randomUUID();
          const ref = `edge-${mode}-${randomUUID()}`;
          const first = await blob(key, ref, bytes);
          if (first.status === 200) {
            stored++;
            expect((first.data as { data: string }).data.length).toBe(bytes);
            const replay = await blob(key, ref, bytes);
            expect(replay.status).toBe(200);
            expect((replay.data as { data: string }).data.length).toBe(bytes);
            expect(await ledgerRows(ref)).toBe(1);
          } else {
            refused++;
            expect(first.status).toBe(500);
            expect(first.reason).toBe('response_too_large');
            // Whatever the serializer's overhead, a result longer than the limit itself can never fit.
            expect(await ledgerRows(ref)).toBe(0);
          }
          if (bytes > LIMIT) expect(first.status).toBe(500);
        }),
        { numRuns: 25, seed: 64 },
      );
      console.log(
        `[hostile] ${mode}: sizes within ±2 KiB of ${LIMIT} B: ${stored} stored and replayed whole, ${refused} refused with response_too_large`,
      );
    });
  });
});
