import type { TRPCError } from '@trpc/server';
import superjson from 'superjson';
import { describe, expect, it } from 'vitest';
import { StoredErrorCause } from '../errors/stored-error-cause.js';
import { defaultSerializer } from './serializer.js';
import { causeToStore } from './stored-cause.js';
import { decodeStoredResponse, encodeStoredResponse, replayOutcome } from './stored-response.js';

const replayed = (text: string, serializer = defaultSerializer): TRPCError => {
  try {
    replayOutcome(decodeStoredResponse(text, serializer));
  } catch (error) {
    return error as TRPCError;
  }
  throw new Error('not an error');
};

describe("a stored error's cause", () => {
  it('replays as a StoredErrorCause with the name, message and fields (through either serializer)', () => {
    class PaymentError extends Error {
      declineCode = 'insufficient_funds';
      at = new Date(5);
      constructor() {
        super('declined');
        this.name = 'PaymentError';
      }
    }
    for (const serializer of [defaultSerializer, superjson]) {
      const cause = causeToStore(new PaymentError(), serializer);
      const text = encodeStoredResponse(
        { ok: false, error: { code: 'PAYMENT_REQUIRED', message: 'm', cause } },
        serializer,
      );
      const error = replayed(text, serializer);
      expect(error).toMatchObject({ code: 'PAYMENT_REQUIRED', message: 'm' });
      expect(error.cause).toBeInstanceOf(StoredErrorCause);
      expect(error.cause).toMatchObject({
        name: 'PaymentError',
        message: 'declined',
        declineCode: 'insufficient_funds',
      });
      expect((error.cause as StoredErrorCause).at).toEqual(new Date(5));
    }
  });

  it("keeps a validation error's non-enumerable issues; a field named __proto__ never changes the prototype", () => {
    const validation = new Error('invalid');
    Object.defineProperty(validation, 'issues', { value: [{ path: ['quantity'], message: 'too small' }] });
    const hostile = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}');
    for (const [source, check] of [
      [validation, (c: StoredErrorCause) => expect(c.issues).toEqual([{ path: ['quantity'], message: 'too small' }])],
      [
        hostile,
        (c: StoredErrorCause) => {
          expect(Object.getPrototypeOf(c)).toBe(StoredErrorCause.prototype);
          expect(c.polluted).toBeUndefined(); // Object's and Error's own members win over a field's name
          expect(c.ok).toBe(1);
        },
      ],
    ] as const) {
      const cause = causeToStore(source, defaultSerializer);
      check(
        replayed(
          encodeStoredResponse({ ok: false, error: { code: 'BAD_REQUEST', message: 'm', cause } }, defaultSerializer),
        ).cause as StoredErrorCause,
      );
    }
  });

  // Unreadable: what the serializer cannot read back.
  it('is left out, never failing the store, when it holds a cycle, a throwing getter or an unreadable value', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const getter = Object.defineProperty(new Error('g'), 'boom', {
      enumerable: true,
      get() {
        throw new Error('no');
      },
    });
    expect(causeToStore(Object.assign(new Error('c'), cyclic), defaultSerializer)).toBeUndefined();
    expect(causeToStore(getter, defaultSerializer)).toBeUndefined();
    expect(causeToStore(Object.assign(new Error('b'), { pdf: Buffer.from('%PDF') }), superjson)).toBeUndefined();
    expect(causeToStore(undefined, defaultSerializer)).toBeUndefined();
  });

  it('reads rows written before causes were stored, and replays without a cause it cannot read', () => {
    const old = '{"v":1,"ok":false,"error":{"code":"PAYMENT_REQUIRED","message":"declined"}}';
    expect(replayed(old)).toMatchObject({ code: 'PAYMENT_REQUIRED', message: 'declined', cause: undefined });
    const unreadable =
      '{"v":1,"ok":false,"error":{"code":"NOT_FOUND","message":"m",' +
      '"cause":{"name":"E","message":"x","data":{"$nope":1}}}}';
    expect(replayed(unreadable)).toMatchObject({ code: 'NOT_FOUND', message: 'm', cause: undefined });
  });
});
