import { TRPCError } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { checkPath, checkScope } from './call-text.js';

describe('checkScope', () => {
  it('returns a well-formed scope unchanged, U+FFFD and surrogate pairs included', () => {
    for (const scope of ['user:5', 'tenant:\uFFFD', 'emoji:😀', '']) expect(checkScope(scope)).toBe(scope);
  });

  it('refuses a lone surrogate or NUL with a 400 TRPCError naming the character and its index', () => {
    for (const [scope, detail] of [
      ['t:\uD800', 'lone surrogate U+D800 at index 2'],
      ['\uDFFFx', 'lone surrogate U+DFFF at index 0'],
      ['a\u0000', 'NUL character at index 1'],
    ] as const) {
      const attempt = () => checkScope(scope);
      expect(attempt).toThrow(TRPCError);
      expect(attempt).toThrow(detail);
      try {
        attempt();
      } catch (error) {
        expect((error as TRPCError).code).toBe('BAD_REQUEST');
      }
    }
  });

  // On every dialect.
  it('refuses a scope over 2048 bytes of UTF-8 with a 400 naming the limit and only its own database', () => {
    for (const name of ['postgres', 'mysql', 'sqlite'] as const) {
      expect(checkScope('x'.repeat(2048), { name })).toHaveLength(2048);
      expect(checkScope('é'.repeat(1024), { name })).toHaveLength(1024);
      for (const [scope, bytes] of [
        ['x'.repeat(2049), 2049],
        ['é'.repeat(1025), 2050],
        ['x'.repeat(65_536), 65_536],
      ] as const) {
        const attempt = () => checkScope(scope, { name });
        expect(attempt).toThrow(TRPCError);
        expect(attempt).toThrow(new RegExp(`is ${bytes} bytes of UTF-8; .* at most 2048 bytes`));
        if (name !== 'postgres') expect(attempt).not.toThrow(/postgres/i);
        try {
          attempt();
        } catch (error) {
          expect((error as TRPCError).code).toBe('BAD_REQUEST');
        }
      }
    }
    expect(() => checkScope('x'.repeat(2049), { name: 'mysql' })).toThrow(
      'is 2049 bytes of UTF-8; the MySQL/MariaDB table holds a scope of at most 2048 bytes',
    );
    expect(() => checkScope('a\u0000', { name: 'sqlite' })).toThrow(/^(?!.*Postgres).*NUL character at index 1/);
  });

  it('refuses a scope that is not a string as a programming error (TypeError, a 500)', () => {
    expect(() => checkScope(5)).toThrow(TypeError);
    expect(() => checkScope(undefined)).toThrow('`scope` must return a string, got undefined');
  });
});

describe('checkPath', () => {
  it('passes a procedure path through and refuses one Postgres text cannot hold', () => {
    expect(checkPath('payments.create')).toBe('payments.create');
    expect(() => checkPath('odd.\uD800')).toThrow(/procedure path .* lone surrogate U\+D800/);
  });
});
