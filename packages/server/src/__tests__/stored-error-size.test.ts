import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultSerializer } from '../serialize/serializer.js';
import { encodeStoredResponse } from '../serialize/stored-response.js';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, openDialectBackend } from './dialect-backends.js';
import { expectReason, failure } from './expectations.js';

let keySeq = 0;
const newKey = () => `se-${Date.now().toString(36)}-${++keySeq}`;

/** The stored text of a BAD_REQUEST whose message is empty: what a message of n bytes adds to, byte for byte. */
const errorEnvelope = encodeStoredResponse(
  { ok: false, error: { code: 'BAD_REQUEST', message: '' } },
  defaultSerializer,
).length;

/**
 * A deterministic error (stored and replayed, `storeErrors`) is a result like a success: one whose stored text is
 * larger than the key can hold — `maxResponseBytes`, or on MySQL/MariaDB what one statement carries — is refused as
 * its success twin is (`response_too_large`, writes rolled back, key freed), never a retryable 500, and never
 * stored truncated: the replay would differ from what the first caller saw.
 */
describe.each(DIALECT_BACKENDS)('a stored error too large to store, on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    // The longest scope (`user:` and 2043 characters) is written to payments.user_id too.
    if (name === 'mariadb') await backend.query('ALTER TABLE payments MODIFY user_id TEXT NOT NULL');
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  const paymentsOf = async (userId: string) =>
    (
      await backend.query<{ amount: number }>(
        `SELECT amount FROM payments WHERE user_id = ${backend.text(userId)} ORDER BY id`,
      )
    ).map((r) => Number(r.amount));
  /** The handler writes a payment of `amount`, then throws a BAD_REQUEST whose stored text is `amount` bytes. */
  const throwingStoredErrors = (app: ReturnType<typeof makeDialectApp>) => {
    app.control.result = (input) => {
      throw new TRPCError({ code: 'BAD_REQUEST', message: 'e'.repeat(input.amount - errorEnvelope) });
    };
  };

  /**
   * Refused over `limit`, its writes rolled back and the key freed (a retry runs the handler again and is refused
   * again); at `limit` stored whole and replayed from the row by an instance without it cached, handler not run.
   */
  async function refusedThenStoredAtLimit(
    app: ReturnType<typeof makeDialectApp>,
    fresh: () => ReturnType<typeof makeDialectApp>,
    user: string,
    key: string,
    overSizes: number[],
    limit: number,
    why: RegExp,
  ) {
    throwingStoredErrors(app);
    for (const bytes of overSizes) {
      for (let attempt = 0; attempt < 2; attempt++) {
        const runs = app.control.runs;
        const error = await expectReason(
          app.caller(key, user).payments.create({ amount: bytes }),
          'response_too_large',
          'INTERNAL_SERVER_ERROR',
        );
        expect(error.message).toMatch(why);
        expect(app.control.runs).toBe(runs + 1);
      }
    }
    expect(await paymentsOf(user)).toEqual([]);
    expect(app.events.filter((e) => e.type === 'executed')).toEqual([]);
    // The same key, an error that fits exactly: stored (its writes rolled back as any stored error's) and replayed.
    const runs = app.control.runs;
    const stored = await failure(app.caller(key, user).payments.create({ amount: limit }));
    expect(stored.code).toBe('BAD_REQUEST');
    expect(stored.message).toHaveLength(limit - errorEnvelope);
    expect(app.control.runs).toBe(runs + 1);
    const other = fresh();
    throwingStoredErrors(other);
    const replayed = await failure(other.caller(key, user).payments.create({ amount: limit }));
    expect(replayed.code).toBe('BAD_REQUEST');
    expect(replayed.message).toBe(stored.message);
    expect(other.control.runs).toBe(0);
    expect(other.events.map((e) => e.type)).toEqual(['replayed']);
    expect(await paymentsOf(user)).toEqual([]);
  }

  describe.each(['transaction', 'lease'] as const)('%s mode', (mode) => {
    it('refuses a stored error over maxResponseBytes as response_too_large: writes undone, key freed', async () => {
      const limit = 4096;
      const app = makeDialectApp(backend, { mode, maxResponseBytes: limit });
      const user = `max-${mode}`;
      await refusedThenStoredAtLimit(
        app,
        () => makeDialectApp(backend, { mode, maxResponseBytes: limit, cache: false }),
        user,
        newKey(),
        [limit + 1, limit * 4],
        limit,
        /maxResponseBytes \(4096\)/,
      );
    });

    // MySQL/MariaDB: the result travels as a hex literal in one statement, refused by the server past
    // max_allowed_packet. Provoked as mysql-dialect.test.ts's success twin does: maxResponseBytes far above it, the
    // longest scope and key (the most statement around the result), a message as large as the server refuses.
    it.runIf(name === 'mariadb')(
      'refuses a stored error larger than one statement can carry (max_allowed_packet) as response_too_large',
      async () => {
        const packet = Number((await backend.query<{ p: number }>('SELECT @@max_allowed_packet AS p'))[0]?.p);
        const ceiling = Math.floor((packet - 16 * 1024) / 2);
        const opts = { mode, maxResponseBytes: packet * 2 };
        const app = makeDialectApp(backend, opts);
        const user = `${mode[0]}`.padEnd(2048 - 'user:'.length, 'x');
        await refusedThenStoredAtLimit(
          app,
          () => makeDialectApp(backend.another(), { ...opts, cache: false }),
          user,
          `${newKey()}-${mode}-`.padEnd(255, 'k'),
          // Far over (the statement alone is over max_allowed_packet), then one byte over the ceiling.
          [Math.floor(packet / 2) + 1, ceiling + 1],
          ceiling,
          /max_allowed_packet/,
        );
      },
      // Two results of 8 MiB built, hex-encoded and sent per mode: minutes on a loaded machine, never a timing check.
      120_000,
    );
  });
});
