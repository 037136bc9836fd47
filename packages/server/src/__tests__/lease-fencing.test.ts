import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectReason } from './expectations.js';
import { type Backend, deferred, makeApp, openBackend, until } from './harness.js';

let keySeq = 0;
const newKey = () => `f-${Date.now().toString(36)}-${++keySeq}`;

/** A holder whose lease was taken over must never answer as if its outcome were the key's. */
describe.each(['pg-fast', 'pg-general'] as const)('a fenced-off lease holder on %s', (name) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await openBackend(name);
    await makeApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  it('answers 409 in_progress for its stored error once a takeover stored a success, like its success path', async () => {
    const stale = makeApp(backend, { mode: 'lease' });
    const fresh = makeApp(backend.another(), { mode: 'lease' });
    const key = newKey();
    const gate = deferred();
    stale.control.gate = gate.promise;
    const staleCall = stale.caller(key, 'fenced-error').payments.create({ amount: 4 });
    await until(() => stale.control.runs === 1);
    // The holder "dies": its lease runs out while it is still (unknowingly) running.
    await backend.query(
      `UPDATE idempotency_keys SET locked_until = clock_timestamp() - interval '1 second' WHERE key = '${key}'`,
    );
    const freshResult = await fresh.caller(key, 'fenced-error').payments.create({ amount: 4 });
    // The stale holder now fails with a deterministic error, which would be stored if it still owned the key.
    stale.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'card declined' });
    gate.resolve();
    await expectReason(staleCall, 'in_progress', 'CONFLICT');
    expect(stale.events.map((e) => e.type)).toEqual(['conflict']);
    // One key, one answer: every later call gets the winner's success.
    expect(await stale.caller(key, 'fenced-error').payments.create({ amount: 4 })).toEqual(freshResult);
  });
});
