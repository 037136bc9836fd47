import type {
  IdempotencyErrorData as ClientErrorData,
  IdempotencyReason as ClientReason,
} from '@trpc-idempotency/client';
import type {
  IdempotencyErrorData as ServerErrorData,
  IdempotencyReason as ServerReason,
} from '@trpc-idempotency/server';
import { describe, expectTypeOf, it } from 'vitest';

// The client cannot import the server at run time, so it declares the wire contract's types itself;
// this keeps the two declarations from drifting apart.
describe('the client and the server agree on the error contract', () => {
  it('names the same idempotency reasons', () => {
    expectTypeOf<ClientReason>().toEqualTypeOf<ServerReason>();
  });

  it('reads error.data.idempotency in the shape the server writes it', () => {
    expectTypeOf<ServerErrorData>().toExtend<ClientErrorData>();
  });
});
