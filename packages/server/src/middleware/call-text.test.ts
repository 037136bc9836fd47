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

  it('refuses a scope longer than the dialect holds, counted in UTF-8 bytes, with a 400 naming neither Postgres nor the bytes it holds', () => {
    const mysql = { name: 'mysql', maxScopeBytes: 2048 } as const;
    expect(checkScope('x'.repeat(2048), mysql)).toHaveLength(2048);
    expect(checkScope('é'.repeat(1024), mysql)).toHaveLength(1024);
    for (const [scope, bytes] of [
      ['x'.repeat(2049), 2049],
      ['é'.repeat(1025), 2050],
    ] as const) {
      const attempt = () => checkScope(scope, mysql);
      expect(attempt).toThrow(
        `is ${bytes} bytes of UTF-8; the MySQL/MariaDB table holds a scope of at most 2048 bytes`,
      );
      try {
        attempt();
      } catch (error) {
        expect((error as TRPCError).code).toBe('BAD_REQUEST');
      }
    }
    // Postgres and SQLite have no such bound of ours.
    expect(checkScope('x'.repeat(5000))).toHaveLength(5000);
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
