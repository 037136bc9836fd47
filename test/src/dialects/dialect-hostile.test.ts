import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Backend, DIALECTS, openBackend } from '../harness/backends.ts';
import { startPaymentsServer } from '../harness/in-process-server.ts';
import { callRaw } from '../harness/trpc-http.ts';

const visibleKey = fc.string({
  unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: 64,
});
const quote = (key: string) => `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
/**
 * Variants a case-insensitive collation would fold into the original: they must stay apart. (Trailing spaces, which
 * PAD SPACE would fold, cannot travel here: HTTP trims header values. The in-process dialect suite covers them.)
 */
const variants = (s: string) => [...new Set([s, s.toUpperCase(), s.toLowerCase()])];

describe.each(DIALECTS)('hostile keys and scopes on %s', (dialect) => {
  let database: Backend;
  let server: Awaited<ReturnType<typeof startPaymentsServer>>;
  /** A second instance on the same database: its replays come from the database, not the first one's cache. */
  let reader: Awaited<ReturnType<typeof startPaymentsServer>>;
  beforeAll(async () => {
    database = await openBackend(dialect);
    server = await startPaymentsServer({ db: database.db });
    reader = await startPaymentsServer({ db: database.db, migrate: false });
  });
  afterAll(async () => {
    await server?.close();
    await reader?.close();
    await database?.drop();
  });

  const echo = (key: string, user: string, input: unknown = { same: true }, port = server.port) =>
    callRaw({ port, path: 'payments.echo', input, key: quote(key), user });

  it('keeps keys and scopes that differ only in case apart (property, seed 12)', async () => {
    let pairs = 0;
    await fc.assert(
      fc.asyncProperty(visibleKey, fc.stringMatching(/^[a-zA-Z0-9]{1,12}$/), async (key, name) => {
        const calls = [
          ...variants(key).map((k) => [k, `u-${name}`] as const),
          ...variants(`u-${name}`).map((u) => [key, u] as const),
        ];
        const unique = [...new Map(calls.map((c) => [`${c[0]}\u0000${c[1]}`, c])).values()];
        const runs = new Set<number>();
        for (const [k, user] of unique) {
          const first = await echo(k, user);
          expect(first.status, first.body.slice(0, 300)).toBe(200);
          runs.add((first.data as { run: number }).run);
        }
        pairs += unique.length;
        // Every variant ran on its own (a fresh run number), none replayed another's row.
        expect(runs.size).toBe(unique.length);
        // And each replays its own result.
        for (const [k, user] of unique) {
          const again = await echo(k, user, undefined, reader.port);
          expect(again.headers['idempotent-replayed']).toBe('true');
          expect((again.data as { user: string }).user).toBe(user);
        }
      }),
      { numRuns: 15, seed: 12 },
    );
    console.log(`[hostile:${dialect}] ${pairs} key/scope variants, each its own row`);
  });

  it('stores and replays any JSON input byte for byte, refusing another payload on the same key (property, seed 13)', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(visibleKey, fc.jsonValue({ maxDepth: 3 }), async (key, value) => {
        const user = `json-${++run}`;
        const first = await echo(key, user, { v: value });
        expect(first.status, first.body.slice(0, 300)).toBe(200);
        const again = await echo(key, user, { v: value }, reader.port);
        expect(again.body).toBe(first.body);
        const other = await echo(key, user, { v: value, other: true }, reader.port);
        expect(other.status).toBe(422);
      }),
      { numRuns: 40, seed: 13 },
    );
  });
});
