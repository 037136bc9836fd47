import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { postgresTextProblem } from './postgres-text.js';

describe('postgresTextProblem', () => {
  it('accepts well-formed text, surrogate pairs and U+FFFD included', () => {
    for (const text of ['', 'user:5', '😀', 'a\uD83D\uDE00b', '\uFFFD', 'é'])
      expect(postgresTextProblem(text)).toBe(undefined);
  });

  it('names a NUL or a lone surrogate and where it is', () => {
    expect(postgresTextProblem('ab\u0000')).toBe('contains the NUL character at index 2');
    expect(postgresTextProblem('t:\uD800')).toBe('is not well-formed UTF-16: lone surrogate U+D800 at index 2');
    expect(postgresTextProblem('\uDFFF\uD800')).toMatch(/U\+DFFF at index 0/);
    expect(postgresTextProblem('\uD83D\uDE00\uDE00')).toMatch(/U\+DE00 at index 2/);
  });
});

describe('postgresTextProblem against a real Postgres text column', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase(inject('pgAdminUrl'));
  });
  afterAll(() => tdb?.drop());

  it('accepts exactly the strings that Postgres text stores and returns unchanged (seed 20261203)', async () => {
    // Strings built from the code units that matter: NUL, both surrogate halves, U+FFFD, ASCII.
    const unit = fc.constantFrom('\u0000', '\uD800', '\uDBFF', '\uDC00', '\uDFFF', '\uFFFD', 'a', '\uD83D', '\uDE00');
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(fc.string({ unit, maxLength: 6 }), async (text) => {
        const problem = postgresTextProblem(text);
        let stored: string | undefined;
        try {
          stored = (await tdb.pool.query<{ v: string }>('SELECT $1::text AS v', [text])).rows[0]!.v;
        } catch {
          stored = undefined; // Postgres refused the text (NUL)
        }
        if (problem === undefined) expect(stored).toBe(text);
        else {
          refused++;
          expect(stored).not.toBe(text);
        }
      }),
      { numRuns: 300, seed: 20261203 },
    );
    expect(refused).toBeGreaterThan(0);
  });
});
