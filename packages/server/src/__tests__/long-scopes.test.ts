import { randomBytes } from 'node:crypto';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';

let keySeq = 0;
/** The longest key there is (255 visible ASCII characters), random: the most the primary key must hold with the scope. */
const longKey = () => `ls-${++keySeq}-${randomBytes(255).toString('base64url')}`.slice(0, 255);

/** Scope text of `bytes` bytes: random (nothing for a compressor to find) or one character repeated. */
const SCOPE_TEXTS = {
  random: (bytes: number) => randomBytes(bytes).toString('base64url').slice(0, bytes),
  repetitive: (bytes: number) => 'x'.repeat(bytes),
};
const SIZES = [2048, 3072, 8192, 65_536];

/**
 * Long scopes (a JWT, a list of tenant ids) with the longest key. A btree entry in Postgres holds at most 2704
 * bytes after compression ("index row size … exceeds btree version 4 maximum"), MySQL/MariaDB's table a scope of
 * 2048 bytes. Whatever a dialect can hold, a scope is stored and replayed exactly, or refused up front with a 400
 * that names the limit: never a 500 (a retry would fail the same way), never a run whose result was not stored.
 */
describe.each(DIALECT_BACKENDS)('long scopes on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  const rowsOf = async (scope: string, key: string) =>
    Number(
      (
        await backend.query<{ n: unknown }>(
          `SELECT count(*) AS n FROM idempotency_keys WHERE scope = ${backend.text(scope)} AND ${name === 'mariadb' ? '`key`' : 'key'} = ${backend.text(key)}`,
        )
      )[0]?.n,
    );

  for (const mode of ['transaction', 'lease'] as const) {
    for (const [kind, text] of Object.entries(SCOPE_TEXTS)) {
      for (const bytes of SIZES) {
        it(`${mode} mode: a ${bytes}-byte ${kind} scope with a 255-character key is stored and replayed exactly, or refused with a 400 naming the limit`, async () => {
          // The scope is the text itself (the handler's payment row keeps a short user id).
          const scope = text(bytes);
          const app = makeDialectApp(backend, { mode, scope: () => scope });
          const key = longKey();
          let first: unknown;
          try {
            first = await app.caller(key, 'long-scope').payments.create({ amount: 1 });
          } catch (error) {
            expect(error).toBeInstanceOf(TRPCError);
            const { code, message } = error as TRPCError;
            expect({ code, message: message.slice(0, 300) }).toEqual({
              code: 'BAD_REQUEST',
              message: expect.stringMatching(
                new RegExp(`scope for this request is ${bytes} bytes .* at most \\d+ bytes`),
              ),
            });
            expect(app.control.runs).toBe(0);
            expect(await rowsOf(scope, key)).toBe(0);
            return;
          }
          // Stored: another instance without the cache replays it from the database, byte-exact scope and key.
          const fresh = makeDialectApp(backend, { mode, cache: false, scope: () => scope });
          expect(await fresh.caller(key, 'long-scope').payments.create({ amount: 1 })).toEqual(first);
          expect(app.control.runs + fresh.control.runs).toBe(1);
          expect(await rowsOf(scope, key)).toBe(1);
        });
      }
    }
  }

  it('never lets two long scopes that differ only in their last character share a row', async () => {
    const app = makeDialectApp(backend, { cache: false });
    const key = longKey();
    const body = SCOPE_TEXTS.random(8192);
    const answers = [];
    for (const user of [`${body}a`, `${body}b`]) {
      answers.push(
        await app
          .caller(key, user)
          .payments.create({ amount: 1 })
          .then(
            (value) => ({ ran: true, value }),
            (error: TRPCError) => ({ ran: false, code: error.code }),
          ),
      );
    }
    // Both refused alike, or two rows: each ran, neither replayed the other's result.
    if (answers.every((a) => !a.ran))
      expect(answers.map((a) => (a as { code: string }).code)).toEqual(['BAD_REQUEST', 'BAD_REQUEST']);
    else
      expect({ runs: app.control.runs, distinct: new Set(answers.map((a) => JSON.stringify(a))).size }).toEqual({
        runs: 2,
        distinct: 2,
      });
  });
});
