import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from '../harness/backends.ts';
import { PaymentsFixture } from '../harness/in-process-server.ts';
import { seededRandom } from '../harness/seeded-random.ts';
import { callRaw } from '../harness/trpc-http.ts';

const f = new PaymentsFixture();

const echo = (key: string, input: unknown, path = 'payments.echo') =>
  callRaw({ port: f.server.port, path, input, key });

/** The same JSON value with every object's keys in another order (integer-like keys keep JS's own order). */
function permute(value: unknown, random: () => number): unknown {
  if (Array.isArray(value)) return value.map((v) => permute(v, random));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value).map(([k, v]) => [k, permute(v, random)] as const);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [entries[i], entries[j]] = [entries[j] as (typeof entries)[number], entries[i] as (typeof entries)[number]];
  }
  return Object.fromEntries(entries);
}

/** The same JSON value with exactly one leaf changed to something that serialises differently. */
function changeOneLeaf(value: unknown, pick: number): unknown {
  const leaves: string[][] = [];
  const walk = (v: unknown, path: string[]) => {
    if (v !== null && typeof v === 'object' && Object.keys(v).length > 0) {
      for (const [k, child] of Object.entries(v)) walk(child, [...path, k]);
    } else leaves.push(path);
  };
  walk(value, []);
  const target = leaves[pick % leaves.length] ?? [];
  const change = (v: unknown): unknown => {
    if (typeof v === 'number') return v === 0 ? 1 : -v;
    if (typeof v === 'string') return `${v}x`;
    if (typeof v === 'boolean') return !v;
    if (v === null) return 0;
    if (Array.isArray(v)) return [0];
    return { added: 1 };
  };
  const rebuild = (v: unknown, depth: number): unknown => {
    if (depth === target.length) return change(v);
    const k = target[depth] as string;
    if (Array.isArray(v)) return v.map((c, i) => (String(i) === k ? rebuild(c, depth + 1) : c));
    return Object.fromEntries(Object.entries(v as object).map(([ek, c]) => [ek, ek === k ? rebuild(c, depth + 1) : c]));
  };
  return rebuild(value, 0);
}

const json = fc.jsonValue({ maxDepth: 4 });

describe.each(BACKENDS)('fingerprints on %s', (backendName) => {
  f.use(backendName);

  describe('fingerprints, observed through the server', () => {
    it('replays the stored result when the same key comes back with the input’s object keys in any order', async () => {
      const before = f.server.counters.executions;
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(json, fc.integer(), async (value, seed) => {
          runs++;
          const key = randomUUID();
          const input = { v: value, at: 'first' };
          const first = await echo(key, input);
          expect(first.status, first.body.slice(0, 300)).toBe(200);
          const replay = await echo(key, permute(input, seededRandom(seed)));
          expect(replay.status, replay.body.slice(0, 300)).toBe(200);
          expect(replay.data).toEqual(first.data);
          expect(replay.headers['idempotent-replayed']).toBe('true');
        }),
        { numRuns: 60, seed: 61 },
      );
      expect(f.server.counters.executions - before).toBe(runs);
      console.log(
        `[hostile] property: ${runs} key-order permutations all replayed; handlers ran ${runs} times (once per key)`,
      );
    });

    it('answers 422 payload_mismatch when the same key comes back with any one value changed', async () => {
      const before = f.server.counters.executions;
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(json, fc.nat(), async (value, pick) => {
          runs++;
          const key = randomUUID();
          const input = { v: value };
          const changed = changeOneLeaf(input, pick);
          expect(JSON.stringify(changed)).not.toBe(JSON.stringify(input));
          const first = await echo(key, input);
          expect(first.status).toBe(200);
          const second = await echo(key, changed);
          expect(
            second.status,
            `${JSON.stringify(input)} → ${JSON.stringify(changed)}: ${second.body.slice(0, 300)}`,
          ).toBe(422);
          expect(second.reason).toBe('payload_mismatch');
        }),
        { numRuns: 60, seed: 62 },
      );
      expect(f.server.counters.executions - before).toBe(runs);
      console.log(`[hostile] property: ${runs} single-value changes all answered 422 payload_mismatch`);
    });

    it('tells apart values that loose equality or string conversion would merge', async () => {
      const pairs: [unknown, unknown][] = [
        [{ a: 1 }, { a: '1' }],
        [{ a: 0 }, { a: false }],
        [{ a: null }, {}],
        [{ a: null }, { a: 0 }],
        [{ a: '' }, { a: null }],
        [{ a: [] }, { a: {} }],
        [{ a: [1, 2] }, { a: [2, 1] }],
        [{ a: 'a' }, { a: ['a'] }],
        [{ a: { b: 1 } }, { a: { b: '1' } }],
        [
          { a: 'x', b: 'y' },
          { a: 'xb', b: '' },
        ],
        [{ a: '2024-01-01T00:00:00.000Z' }, { a: '2024-01-01T00:00:00Z' }],
        [{ 'a.b': 1 }, { a: { b: 1 } }],
        [
          [1, [2]],
          [[1], 2],
        ],
      ];
      for (const [a, b] of pairs) {
        const key = randomUUID();
        expect((await echo(key, a)).status).toBe(200);
        const res = await echo(key, b);
        expect(res.reason, `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).toBe('payload_mismatch');
      }
    });

    it('answers 422 when the same key is used on another procedure with the same input', async () => {
      const key = randomUUID();
      const input = { ref: 'r-path', bytes: 1 };
      expect((await echo(key, input, 'payments.echo')).status).toBe(200);
      const other = await echo(key, input, 'payments.blob');
      expect(other.status).toBe(422);
      expect(other.reason).toBe('payload_mismatch');
    });
  });
});
