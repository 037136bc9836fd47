import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from '../harness/backends.ts';
import { PaymentsFixture } from '../harness/in-process-server.ts';
import { callRaw } from '../harness/trpc-http.ts';

const f = new PaymentsFixture();

const visibleKey = fc.string({
  unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: 64,
});
const quote = (key: string) => `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;

describe.each(BACKENDS)('scope isolation on %s', (backendName) => {
  f.use(backendName);

  describe('scope isolation', () => {
    it('never replays one user’s stored result to another user, whatever the key and input', async () => {
      let runs = 0;
      let crossReplays = 0;
      await fc.assert(
        fc.asyncProperty(visibleKey, fc.jsonValue({ maxDepth: 2 }), fc.boolean(), async (key, value, sameInput) => {
          runs++;
          // Fresh users per run keep runs independent even when fast-check repeats a key.
          const a = `a${runs}`;
          const b = `b${runs}`;
          const input = { v: value };
          const fromA = await callRaw({ port: f.server.port, path: 'payments.echo', input, key: quote(key), user: a });
          expect(fromA.status, fromA.body.slice(0, 300)).toBe(200);
          const before = f.server.counters.executions;
          const fromB = await callRaw({
            port: f.server.port,
            path: 'payments.echo',
            input: sameInput ? input : { v: value, other: true },
            key: quote(key),
            user: b,
          });
          // B's call is B's own: it runs, answers as B, and is not flagged as a replay.
          expect(fromB.status, fromB.body.slice(0, 300)).toBe(200);
          expect((fromB.data as { user: string }).user).toBe(b);
          expect(fromB.headers['idempotent-replayed']).toBeUndefined();
          expect(f.server.counters.executions).toBe(before + 1);
          if ((fromB.data as { user: string }).user === a) crossReplays++;
          // And A still gets A's result back.
          const againA = await callRaw({ port: f.server.port, path: 'payments.echo', input, key: quote(key), user: a });
          expect(againA.data).toEqual(fromA.data);
        }),
        { numRuns: 60, seed: 63 },
      );
      console.log(
        `[hostile] property: ${runs} keys shared by two users, ${crossReplays} cross-user replays, each user got their own result`,
      );
    });

    it('keeps apart scope/key pairs whose concatenations are equal', async () => {
      // If storage or a cache joined scope and key without a separator, these would collide.
      const pairs: [user: string, key: string][] = [
        ['ab', 'c'],
        ['a', 'bc'],
        ['a:b', 'c'],
        ['a', 'b:c'],
        ['a/b', 'c'],
        ['a', 'b/c'],
        ['a|b', 'c'],
        ['a', 'b|c'],
      ];
      const runs = new Set<number>();
      for (const [user, key] of pairs) {
        const res = await callRaw({
          port: f.server.port,
          path: 'payments.echo',
          input: { same: true },
          key: quote(key),
          user,
        });
        expect(res.status, res.body.slice(0, 300)).toBe(200);
        expect(res.headers['idempotent-replayed'], `${user} / ${key}`).toBeUndefined();
        expect((res.data as { user: string }).user).toBe(user);
        runs.add((res.data as { run: number }).run);
      }
      expect(runs.size).toBe(pairs.length);
    });
  });
});
