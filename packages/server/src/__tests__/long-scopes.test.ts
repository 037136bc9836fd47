import { randomBytes } from 'node:crypto';
import type { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';

let keySeq = 0;
/** The longest key there is (255 visible ASCII characters), random: the most the primary key holds with the scope. */
const longKey = () => `ls-${++keySeq}-${randomBytes(255).toString('base64url')}`.slice(0, 255);

/** Scope text of `bytes` bytes: random (nothing for a compressor to find) or one character repeated. */
const SCOPE_TEXTS = {
  random: (bytes: number) => randomBytes(bytes).toString('base64url').slice(0, bytes),
  repetitive: (bytes: number) => 'x'.repeat(bytes),
};
const SIZES = [2048, 3072, 8192, 65_536];

/** The longest scope on every dialect (README "Dialects", "columns" row). */
const MAX_SCOPE_BYTES = 2048;

/**
 * Long scopes (a JWT, a list of tenant ids) with the longest key. A btree entry in Postgres holds at most 2704
 * bytes after compression ("index row size … exceeds btree version 4 maximum"), so an incompressible scope of 3 KB
 * failed the claim with a 500 while a repetitive 64 KB one fitted; MySQL/MariaDB's table holds 2048 bytes. Every
 * dialect now stores and replays a scope of up to 2048 bytes exactly and refuses a longer one up front with a 400
 * naming the limit: never a 500 (a retry would fail the same way), never a run whose result was not stored.
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
          `SELECT count(*) AS n FROM idempotency_keys WHERE scope = ${backend.text(scope)}
            AND ${name === 'mariadb' ? '`key`' : 'key'} = ${backend.text(key)}`,
        )
      )[0]?.n,
    );

  for (const mode of ['transaction', 'lease'] as const) {
    for (const [kind, text] of Object.entries(SCOPE_TEXTS)) {
      for (const bytes of SIZES) {
        const fits = bytes <= MAX_SCOPE_BYTES;
        const outcome = fits ? 'stored and replayed exactly' : 'refused with a 400 naming the limit';
        it(`${mode} mode: a ${bytes}-byte ${kind} scope with a 255-character key is ${outcome}`, async () => {
          // The scope is the text itself (the handler's payment row keeps a short user id).
          const scope = text(bytes);
          const app = makeDialectApp(backend, { mode, scope: () => scope });
          const key = longKey();
          const first = await app
            .caller(key, 'long-scope')
            .payments.create({ amount: 1 })
            .then(
              (value) => ({ value }),
              (error: unknown) => ({ error }),
            );
          if (!fits) {
            const { code, message } = (first as { error: TRPCError }).error ?? {};
            expect({ code, message: message?.slice(0, 300) }).toEqual({
              code: 'BAD_REQUEST',
              message: expect.stringMatching(
                new RegExp(`scope for this request is ${bytes} bytes .* at most ${MAX_SCOPE_BYTES} bytes`),
              ),
            });
            expect(app.control.runs).toBe(0);
            expect(await rowsOf(scope, key)).toBe(0);
            return;
          }
          expect(first).toHaveProperty('value');
          // Another instance without the cache replays it from the database, byte-exact scope and key.
          const fresh = makeDialectApp(backend, { mode, cache: false, scope: () => scope });
          expect(await fresh.caller(key, 'long-scope').payments.create({ amount: 1 })).toEqual(
            (first as { value: unknown }).value,
          );
          expect(app.control.runs + fresh.control.runs).toBe(1);
          expect(await rowsOf(scope, key)).toBe(1);
        });
      }
    }
  }

  it('never lets two scopes of the longest length that differ only in their last character share a row', async () => {
    let scope = '';
    const app = makeDialectApp(backend, { cache: false, scope: () => scope });
    const key = longKey();
    const body = SCOPE_TEXTS.random(MAX_SCOPE_BYTES - 1);
    const answers = [];
    for (const last of ['a', 'b']) {
      scope = `${body}${last}`;
      answers.push(await app.caller(key, 'long-scope').payments.create({ amount: 1 }));
    }
    expect(app.control.runs).toBe(2);
    expect(answers[0]).not.toEqual(answers[1]);
    expect([await rowsOf(`${body}a`, key), await rowsOf(`${body}b`, key)]).toEqual([1, 1]);
  });
});
