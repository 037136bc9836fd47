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
