import { TRPCError } from '@trpc/server';
import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import fc from 'fast-check';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, expectTypeOf, inject, it } from 'vitest';
import { postgresTextProblem } from './postgres-text.js';
import { defaultSerializer, type Serializer } from './serializer.js';
import { decodeStoredResponse, encodeStoredResponse, replayOutcome, type StoredOutcome } from './stored-response.js';

declare module 'vitest' {
  interface ProvidedContext {
    pgAdminUrl: string;
  }
}

describe('encodeStoredResponse / decodeStoredResponse', () => {
  it('round-trips a success through the default serializer', () => {
    const outcome: StoredOutcome = { ok: true, data: { at: new Date(1), ids: new Set([1n]) } };
    expect(decodeStoredResponse(encodeStoredResponse(outcome, defaultSerializer), defaultSerializer)).toEqual(outcome);
  });

  it('refuses a serializer that answers with a Promise, instead of storing {} for every result', () => {
    // Found by an outside review: an async serialize stored the Promise, which JSON writes as {}.
    const asyncSerializer = { serialize: async (v: unknown) => v, deserialize: (v: unknown) => v };
    expect(() => encodeStoredResponse({ ok: true, data: { id: 1 } }, asyncSerializer)).toThrow(
      /serializer\.serialize returned a Promise/,
    );
  });

  it('refuses a result its serializer cannot read back, which no replay could answer (superjson and a Buffer)', () => {
    const outcome: StoredOutcome = { ok: true, data: { id: 7, pdf: Buffer.from('%PDF') } };
    expect(() => encodeStoredResponse(outcome, superjson)).toThrow(/cannot read back/);
    // What it can read back is stored as before.
    expect(
      decodeStoredResponse(encodeStoredResponse({ ok: true, data: new Map([[1, 2]]) }, superjson), superjson),
    ).toEqual({ ok: true, data: new Map([[1, 2]]) });
  });

  it('refuses a result holding a Promise or an async iterable anywhere, naming where, with either serializer', () => {
    async function* items() {
      yield 1;
    }
    const cases: [unknown, RegExp][] = [
      [{ payment: 1, receipt: Promise.resolve('r') }, /a Promise at result\.receipt/],
      [Promise.resolve(1), /a Promise at result,/],
      [{ list: [1, { events: items() }] }, /an async iterable at result\.list\[1\]\.events/],
      [new Map([['k', Promise.resolve(1)]]), /a Promise at result\.get\("k"\)/],
    ];
    for (const serializer of [defaultSerializer, superjson]) {
      for (const [data, message] of cases) {
        expect(() => encodeStoredResponse({ ok: true, data }, serializer)).toThrow(message);
      }
    }
  });

  it('round-trips a top-level undefined result', () => {
    const text = encodeStoredResponse({ ok: true, data: undefined }, defaultSerializer);
    expect(decodeStoredResponse(text, defaultSerializer)).toEqual({ ok: true, data: undefined });
  });

  it('round-trips a stored error as its code and message', () => {
    const outcome: StoredOutcome = { ok: false, error: { code: 'NOT_FOUND', message: 'no such order' } };
    expect(decodeStoredResponse(encodeStoredResponse(outcome, defaultSerializer), defaultSerializer)).toEqual(outcome);
  });

  it('writes text with no NUL byte and no lone surrogate, so Postgres text accepts it', () => {
    const text = encodeStoredResponse({ ok: true, data: { s: 'a\u0000b\uD800c' } }, defaultSerializer);
    expect(text).not.toContain('\u0000');
    expect(Buffer.from(text, 'utf8').toString('utf8')).toBe(text); // survives UTF-8, so no lone surrogate
    expect(decodeStoredResponse(text, defaultSerializer)).toEqual({ ok: true, data: { s: 'a\u0000b\uD800c' } });
  });

  it('writes text Postgres stores exactly for any string in data or in an error message (seed 1203)', () => {
    // JSON.stringify escapes NUL and lone surrogates, so no check is needed at encode time: this pins that.
    const text = fc.string({ unit: 'binary', maxLength: 8 });
    fc.assert(
      fc.property(fc.dictionary(text, text, { maxKeys: 3 }), text, (data, message) => {
        for (const outcome of [
          { ok: true, data },
          { ok: false, error: { code: 'CONFLICT', message } },
        ] satisfies StoredOutcome[]) {
          const stored = encodeStoredResponse(outcome, defaultSerializer);
          expect(postgresTextProblem(stored)).toBe(undefined);
          expect(decodeStoredResponse(stored, defaultSerializer)).toEqual(outcome);
        }
      }),
      { numRuns: 300, seed: 1203 },
    );
  });

  it('works with superjson passed as the serializer, keeping Date and Map', () => {
    expectTypeOf(superjson).toExtend<Serializer>();
    const data = { at: new Date('2024-02-03T00:00:00.000Z'), m: new Map([['k', 1n]]), u: undefined };
    const text = encodeStoredResponse({ ok: true, data }, superjson);
    const back = decodeStoredResponse(text, superjson);
    expect(back).toEqual({ ok: true, data });
    expect((back as { data: typeof data }).data.at).toBeInstanceOf(Date);
    expect(decodeStoredResponse(encodeStoredResponse({ ok: true, data: undefined }, superjson), superjson)).toEqual({
      ok: true,
      data: undefined,
    });
  });

  it('refuses text it did not write, saying so', () => {
    for (const text of ['not json', '42', '{"v":2,"ok":true}', '{"v":1}', '{"v":1,"ok":false,"error":{"code":1}}']) {
      expect(() => decodeStoredResponse(text, defaultSerializer), text).toThrow(/Stored idempotency response/);
    }
  });
});

describe('replayOutcome', () => {
  it('returns stored data', () => {
    expect(replayOutcome({ ok: true, data: 5 })).toBe(5);
  });

  it('throws a stored error again as a TRPCError with its code and message', () => {
    try {
      replayOutcome({ ok: false, error: { code: 'PAYMENT_REQUIRED', message: 'card declined' } });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(TRPCError);
      expect((error as TRPCError).code).toBe('PAYMENT_REQUIRED');
      expect((error as TRPCError).message).toBe('card declined');
    }
  });
});

describe('stored text in a Postgres text column', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase(inject('pgAdminUrl'));
    await tdb.pool.query('CREATE TABLE responses (id int PRIMARY KEY, response text NOT NULL)');
  });
  afterAll(() => tdb?.drop());

  it('reads back byte for byte, NUL characters, key order and unicode included', async () => {
    const data = {
      z: 1,
      a: 'nul:\u0000 quote:" backslash:\\ emoji:😀 lone:\uDC00 newline:\n',
      m: new Map<unknown, unknown>([[{ b: 1, a: 2 }, new Date(0)]]),
      n: [1.5, -0, 1e21, Number.NaN],
    };
    const text = encodeStoredResponse({ ok: true, data }, defaultSerializer);
    await tdb.pool.query('INSERT INTO responses (id, response) VALUES (1, $1)', [text]);
    const { rows } = await tdb.pool.query<{ response: string }>('SELECT response FROM responses WHERE id = 1');
    expect(rows[0]!.response).toBe(text);
    const back = decodeStoredResponse(rows[0]!.response, defaultSerializer) as { ok: true; data: typeof data };
    expect(back.data).toStrictEqual(data);
    expect(Object.keys(back.data)).toEqual(['z', 'a', 'm', 'n']);
  });
});
