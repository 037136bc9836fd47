import { getTRPCErrorShape, TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { str } from './dialect-rows.js';
import { failure } from './expectations.js';

let keySeq = 0;
const newKey = () => `d-${Date.now().toString(36)}-${++keySeq}`;

describe.each(DIALECT_BACKENDS)('core behaviours on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());
  it('compares keys and scopes byte-exact: abc ≠ ABC and k ≠ "k " (no case folding, no PAD SPACE)', async () => {
    const app = makeDialectApp(backend, { cache: false });
    // Keys are visible ASCII (no space); scopes may end in one.
    const calls: [string, string][] = [
      ['abc', 'k'],
      ['ABC', 'k'],
      ['abc', 'K'],
      ['abc', 'k '],
      ['abc', 'k  '],
    ];
    const first = [];
    for (const [key, user] of calls) first.push(await app.caller(key, user).payments.create({ amount: 1 }));
    expect(app.control.runs).toBe(calls.length);
    expect(new Set(first.map((r) => JSON.stringify(r))).size).toBe(calls.length);
    for (const [i, [key, user]] of calls.entries()) {
      expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual(first[i]);
    }
    expect(app.control.runs).toBe(calls.length);
  });

  it('stores quotes, backslashes, NUL escapes and emoji in scope, key and response byte-exactly', async () => {
    const app = makeDialectApp(backend, { cache: false });
    const key = `q'uo\\te"s-\\'--`;
    const text = `it's a \\ back'slash \u0000 nul, "quotes", emoji 😀, X'00' and $$`;
    app.control.result = () => ({ text });
    const user = `o'brien\\ 😀`;
    expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual({ text });
    expect(await app.caller(key, user).payments.create({ amount: 1 })).toEqual({ text });
    expect(app.control.runs).toBe(1);
    const rows = await backend.query<{ scope: unknown; key: unknown }>(
      `SELECT scope, ${name === 'mariadb' ? '`key`' : 'key'} AS "key" FROM idempotency_keys
        WHERE scope = ${backend.text(`user:${user}`)}`.replace(
        'AS "key"',
        name === 'mariadb' ? 'AS `key`' : 'AS "key"',
      ),
    );
    expect(rows.map((r) => [str(r.scope), str(r.key)])).toEqual([[`user:${user}`, key]]);
  });

  it('refuses a scope with NUL or a lone surrogate as a 400 whose message names no other database', async () => {
    const app = makeDialectApp(backend);
    for (const [id, problem] of [
      ['a\u0000b', /NUL character at index 6/],
      ['t:\uD800', /lone surrogate U\+D800 at index 7/],
    ] as const) {
      const error = await failure(app.caller(newKey(), id).payments.create({ amount: 1 }));
      expect(error.code).toBe('BAD_REQUEST');
      expect(error.message).toMatch(problem);
      // The scope is refused on every dialect alike; the message may name Postgres only where it is Postgres.
      if (name === 'mariadb' || name === 'sqlite' || name === 'libsql') expect(error.message).not.toMatch(/postgres/i);
    }
    expect(app.control.runs).toBe(0);
  });

  for (const mode of ['transaction', 'lease'] as const) {
    // Stored, replayed and payload_mismatch.
    it(`${mode} mode: marks the key's own answers in error.data.idempotencyAnswer`, async () => {
      const app = makeDialectApp(backend, { mode, cache: false });
      const marked = async (call: Promise<unknown>) => {
        const error = await failure(call);
        const shape = getTRPCErrorShape({
          config: app.router._def._config,
          error,
          type: 'mutation',
          path: 'payments.create',
          input: undefined,
          ctx: undefined,
        });
        return [shape.data.httpStatus, shape.data.idempotencyAnswer];
      };
      const stored = newKey();
      app.control.throwAfterWrite = () => new TRPCError({ code: 'FORBIDDEN', message: 'declined' });
      expect(await marked(app.caller(stored).payments.create({ amount: 1 }))).toEqual([403, true]);
      expect(await marked(app.caller(stored).payments.create({ amount: 1 }))).toEqual([403, true]);
      expect(await marked(app.caller(stored).payments.create({ amount: 2 }))).toEqual([422, true]);
      // A handler's error that is not stored frees the key: it is no answer of the key's, nor is a refused key.
      app.control.throwAfterWrite = () => new TRPCError({ code: 'UNAUTHORIZED', message: 'session ended' });
      expect(await marked(app.caller(newKey()).payments.create({ amount: 1 }))).toEqual([401, false]);
      expect(await marked(app.caller(undefined).payments.create({ amount: 1 }))).toEqual([400, false]);
    });
  }

  for (const mode of ['transaction', 'lease'] as const) {
    it(`${mode} mode: counts ttl from the claim, from the completion only for a handler that outlived it`, async () => {
      const keptMs = async (key: string) => {
        const k = name === 'mariadb' ? '`key`' : 'key';
        const span =
          backend.dialect === 'postgres'
            ? 'extract(epoch from (expires_at - created_at)) * 1000'
            : 'expires_at - created_at';
        const [row] = await backend.query<{ ms: unknown }>(
          `SELECT ${span} AS ms FROM idempotency_keys WHERE ${k} = ${backend.text(key)} AND status = 'done'`,
        );
        return Number(row?.ms);
      };
      const long = makeDialectApp(backend, { mode, ttl: 3_600_000, cache: false });
      long.control.delayMs = 400;
      const claimKey = newKey();
      await long.caller(claimKey, `claim-ttl-${mode}`).payments.create({ amount: 1 });
      // created_at and expires_at are the claim's clock; from the completion it would be the handler's 400 ms later.
      expect((await keptMs(claimKey)) - 3_600_000).toBeLessThan(200);
      const short = makeDialectApp(backend, { mode, ttl: 300, cache: false });
      short.control.delayMs = 600;
      const shortKey = newKey();
      await short.caller(shortKey, `short-ttl-${mode}`).payments.create({ amount: 1 });
      // The handler outlived the ttl: its result is kept a full ttl from the completion, past the claim's 300 ms.
      expect(await keptMs(shortKey)).toBeGreaterThanOrEqual(900);
    });
  }
});
