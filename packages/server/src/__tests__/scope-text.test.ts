import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { failure, reasonOf } from './expectations.js';

let keySeq = 0;
const newKey = () => `scope-text-${Date.now().toString(36)}-${++keySeq}`;

// Every dialect stores UTF-8 (Postgres text, MySQL's VARBINARY of UTF-8, SQLite TEXT): a lone surrogate cannot be
// stored and the drivers encode it as U+FFFD, so these three scopes would be one row while JavaScript (the replay
// cache, the in-process gate) sees three.
const LOOK_ALIKE_SCOPES = ['\uD800', '\uDFFF', '\uFFFD'];

describe.each(DIALECT_BACKENDS)('scopes that UTF-8 text cannot hold exactly, on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  for (const cache of [true, false]) {
    // Their scopes differ only in lone surrogates.
    it(`never answers one tenant with another tenant's row (cache ${cache ? 'on' : 'off'})`, async () => {
      const app = makeDialectApp(backend, cache ? {} : { cache: false });
      const key = newKey();
      const answers: { tenant: string; outcome: string }[] = [];
      for (const tenant of LOOK_ALIKE_SCOPES) {
        const runsBefore = app.control.runs;
        let outcome: string;
        try {
          // The same input from every tenant: a shared row would answer with a replay, not a 422.
          await app.caller(key, tenant).payments.create({ amount: 7 });
          // A success must be this tenant's own run, never a replay of a neighbour's.
          outcome = app.control.runs === runsBefore + 1 ? 'ran' : "replayed another tenant's result";
        } catch (error) {
          outcome = (await failure(Promise.reject(error))).code;
        }
        answers.push({ tenant: spelled(tenant), outcome });
      }
      // The lone surrogates are refused as a client error; U+FFFD is a real character and runs.
      expect(answers).toEqual([
        { tenant: '\\ud800', outcome: 'BAD_REQUEST' },
        { tenant: '\\udfff', outcome: 'BAD_REQUEST' },
        { tenant: '\\ufffd', outcome: 'ran' },
      ]);
      const [row] = await backend.query<{ n: unknown }>(
        `SELECT count(*) AS n FROM idempotency_keys WHERE ${backend.keyColumn} = ${backend.text(key)}`,
      );
      expect(Number(row?.n)).toBe(1);
    });
  }

  // Refused on every dialect alike.
  it('refuses a scope holding NUL, which Postgres text cannot store, as a 400 that names the problem', async () => {
    const app = makeDialectApp(backend);
    const error = await failure(app.caller(newKey(), 'a\u0000b').payments.create({ amount: 1 }));
    expect(error.code).toBe('BAD_REQUEST');
    expect(reasonOf(error)).toBeUndefined();
    expect(error.message).toMatch(/scope.*NUL/);
    expect(app.control.runs).toBe(0);
  });

  it('refuses a lone surrogate with a message that says where it is and why', async () => {
    const app = makeDialectApp(backend);
    const error = await failure(app.caller(newKey(), 'ok\uDC00').payments.create({ amount: 1 }));
    expect(error.code).toBe('BAD_REQUEST');
    expect(error.message).toMatch(/scope.*lone surrogate U\+DC00 at index 7/);
    expect(app.control.runs).toBe(0);
  });

  it('refuses a key from the `key` option holding a lone surrogate or NUL as key_invalid', async () => {
    for (const key of ['k\uD800', 'k\u0000']) {
      const app = makeDialectApp(backend, { key: () => key });
      const error = await failure(app.caller(undefined).payments.create({ amount: 1 }));
      expect(reasonOf(error)).toBe('key_invalid');
      expect(app.control.runs).toBe(0);
    }
  });
});

/** The text with every non-ASCII code unit spelled as \uXXXX, so a message shows which tenant it was. */
function spelled(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
