import { TRPCError } from '@trpc/server';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fingerprint } from '../fingerprint/fingerprint.js';
import type { IdempotencyEventType } from '../index.js';
import { defaultSerializer } from '../serialize/serializer.js';
import { MysqlStatements } from '../store/dialects/mysql/mysql-statements.js';
import { parseTableName } from '../store/table-name.js';
import { makeDialectApp } from './dialect-app.js';
import { DIALECT_BACKENDS, type DialectBackend, insertKeyRows, openDialectBackend } from './dialect-backends.js';
import { expectReason, failure } from './expectations.js';
import { deferred, sleep, until } from './harness.js';

let keySeq = 0;
const newKey = () => `cb-${Date.now().toString(36)}-${++keySeq}`;

/** Fails (instead of hanging the suite) when a call is still pending: a session, lock or mutex leaked. */
async function completes<T>(promise: Promise<T>, ms = 15_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms: a session, lock or mutex leaked`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const boom = () => {
  throw new Error('a bug in a user callback');
};

/** The name of a key's MySQL lease lock, as an SQL expression (named as the middleware names it). */
const leaseLock = (scope: string, key: string) =>
  new MysqlStatements(parseTableName('idempotency_keys'), { mariadb: true }).leaseLockName({ scope, key });

/**
 * No user callback (`scope`, `key`, `storeErrors`, `serializer`, `onEvent`) can leak a session, a lock, a mutex or
 * an in-flight-gate entry: after each one throws, the key is usable and nothing is held. One database per dialect
 * serves both modes: opening it is much of what a block costs.
 */
describe.each(DIALECT_BACKENDS)('a throwing user callback on %s', (name) => {
  let backend: DialectBackend;
  beforeAll(async () => {
    backend = await openDialectBackend(name);
    await makeDialectApp(backend).idempotency.migrate();
  });
  afterAll(() => backend?.close());

  /**
   * No connection is left in a transaction (on SQLite: the write lock is free), the fast path's pool has every
   * client back, and on MariaDB no connection holds the lease lock of `keys` (a session lock: it outlives a
   * transaction, and a connection given back with it would keep the key from every other instance). A connection
   * that never went back is caught by the calls that follow: each test makes more than the pool holds.
   */
  const expectNothingHeld = async (keys: string[], userId: string) => {
    await expect.poll(() => backend.idleInTransaction(), { timeout: 5000 }).toBe(0);
    const pool = backend.pool;
    if (pool) await expect.poll(() => pool.totalCount - pool.idleCount, { timeout: 5000 }).toBe(0);
    if (name === 'mariadb') {
      const holders = async () => {
        const used = keys.map((key) => `IS_USED_LOCK(${leaseLock(`user:${userId}`, key)})`).join(', ');
        return (await backend.query<{ holder: unknown }>(`SELECT COALESCE(${used}, NULL) AS holder`))[0]?.holder;
      };
      await expect.poll(holders, { timeout: 5000 }).toBeNull();
    }
  };

  describe.each(['transaction', 'lease'] as const)('in %s mode', (mode) => {
    /** Another instance with sane callbacks runs each key (it was released) and then replays it. */
    const expectKeysUsable = async (keys: string[], userId: string) => {
      const good = makeDialectApp(backend, { mode });
      for (const key of keys) {
        const result = await completes(good.caller(key, userId).payments.create({ amount: 1 }));
        expect(await completes(good.caller(key, userId).payments.create({ amount: 1 }))).toEqual(result);
      }
      expect(good.control.runs).toBe(keys.length);
    };

    // More calls than the pool has connections.
    it('storeErrors that throws: the call fails, the key is released, nothing is held', async () => {
      const bad = makeDialectApp(backend, { mode, storeErrors: boom });
      bad.control.throwAfterWrite = () => new TRPCError({ code: 'PAYMENT_REQUIRED', message: 'declined' });
      const keys = Array.from({ length: backend.connections + 1 }, newKey);
      for (const key of keys) await completes(failure(bad.caller(key, 'cb-store').payments.create({ amount: 1 })));
      await expectNothingHeld(keys, 'cb-store');
      await expectKeysUsable(keys, 'cb-store');
    });

    // Stored errors are kept as plain JSON, never through the serializer: only a success can make it throw.
    it.each([
      ['serialize throws', { serialize: boom, deserialize: defaultSerializer.deserialize }],
      [
        'serialize answers with a Promise',
        { serialize: async (value: unknown) => value, deserialize: defaultSerializer.deserialize },
      ],
      // Found by an outside review: superjson writes a Buffer it cannot read back, so every replay of a committed
      // result failed. A result the serializer cannot read back is never stored.
      ['deserialize cannot read what serialize wrote', { serialize: defaultSerializer.serialize, deserialize: boom }],
    ])('a serializer whose %s on a success: released, nothing held', async (_, serializer) => {
      const bad = makeDialectApp(backend, { mode, serializer });
      const keys = Array.from({ length: backend.connections + 1 }, newKey);
      for (const key of keys) {
        const error = await completes(failure(bad.caller(key, 'cb-ser').payments.create({ amount: 1 })));
        // Said as it is: the result could not be stored, not that the database failed.
        expect(error.message).toMatch(/^The result cannot be stored, so nothing was committed/);
      }
      expect(bad.control.runs).toBe(keys.length);
      await expectNothingHeld(keys, 'cb-ser');
      await expectKeysUsable(keys, 'cb-ser');
    });

    it('serializer.deserialize that throws on a replay: nothing held, a sane instance replays', async () => {
      const good = makeDialectApp(backend, { mode });
      const key = newKey();
      const result = await good.caller(key, 'cb-deser').payments.create({ amount: 1 });
      const bad = makeDialectApp(backend, {
        mode,
        cache: false,
        serializer: { serialize: defaultSerializer.serialize, deserialize: boom },
      });
      for (let i = 0; i <= backend.connections; i++)
        await completes(failure(bad.caller(key, 'cb-deser').payments.create({ amount: 1 })));
      await expectNothingHeld([key], 'cb-deser');
      expect(
        await completes(makeDialectApp(backend, { mode }).caller(key, 'cb-deser').payments.create({ amount: 1 })),
      ).toEqual(result);
    });

    it('scope or key that throws: the call fails before anything is taken', async () => {
      const key = newKey();
      for (const opts of [{ scope: boom }, { key: boom }]) {
        const bad = makeDialectApp(backend, { mode, ...opts });
        for (let i = 0; i <= backend.connections; i++)
          await completes(failure(bad.caller(key, 'cb-scope').payments.create({ amount: 1 })));
        expect(bad.control.runs).toBe(0);
      }
      await expectNothingHeld([key], 'cb-scope');
      await expectKeysUsable([key], 'cb-scope');
    });

    describe('onEvent that throws or rejects on every event kind', () => {
      const unhandled: unknown[] = [];
      const record = (reason: unknown) => unhandled.push(reason);
      beforeEach(() => {
        unhandled.length = 0;
        process.on('unhandledRejection', record);
      });
      afterEach(() => {
        process.off('unhandledRejection', record);
      });

      for (const kind of ['throws', 'rejects'] as const) {
        it(`changes no outcome when it ${kind}`, async () => {
          const seen: IdempotencyEventType[] = [];
          const onEvent = (e: { type: IdempotencyEventType }) => {
            seen.push(e.type);
            if (kind === 'throws') throw new Error(`onEvent bug on ${e.type}`);
            return Promise.reject(new Error(`onEvent bug on ${e.type}`));
          };
          // `wait` long enough that the let-through duplicate below outlasts the original on a loaded machine.
          const app = makeDialectApp(backend, { mode, wait: 2_000, onEvent });
          // Its duplicates answer 409 at once, instead of after `wait`.
          const impatient = makeDialectApp(backend, { mode, wait: 0, onEvent });
          const user = `cb-events-${kind}`;
          const key = newKey();
          // executed, then replayed
          const first = await completes(app.caller(key, user).payments.create({ amount: 1 }));
          expect(await completes(app.caller(key, user).payments.create({ amount: 1 }))).toEqual(first);
          // mismatch
          await expectReason(app.caller(key, user).payments.create({ amount: 2 }), 'payload_mismatch');
          // conflict: a duplicate in the original's process, past its `wait`
          const busy = newKey();
          const held = deferred();
          impatient.control.gate = held.promise;
          const heldOriginal = impatient.caller(busy, user).payments.create({ amount: 3 });
          await until(() => impatient.control.runs === 1);
          await expectReason(impatient.caller(busy, user).payments.create({ amount: 3 }), 'in_progress');
          held.resolve();
          await completes(heldOriginal);
          // waited: a duplicate let through while it waits
          const waitedKey = newKey();
          const gate = deferred();
          app.control.gate = gate.promise;
          const original = app.caller(waitedKey, user).payments.create({ amount: 3 });
          await until(() => app.control.runs === 2);
          const duplicate = app.caller(waitedKey, user).payments.create({ amount: 3 });
          await sleep(50);
          gate.resolve();
          app.control.gate = undefined;
          expect(await completes(duplicate)).toEqual(await completes(original));
          // released
          app.control.throwAfterWrite = () => new TRPCError({ code: 'BAD_GATEWAY', message: 'down' });
          const released = newKey();
          await completes(failure(app.caller(released, user).payments.create({ amount: 4 })));
          app.control.throwAfterWrite = undefined;
          // taken_over: a dead holder's claim
          const dead = newKey();
          if (mode === 'lease') {
            await insertKeyRows(backend, [
              {
                scope: `user:${user}`,
                key: dead,
                fingerprint: await fingerprint('payments.create', { amount: 5 }),
                status: 'in_progress',
                token: 'dead-owner',
                lockedInMs: -1000,
                expiresInMs: 3_600_000,
              },
            ]);
            await completes(app.caller(dead, user).payments.create({ amount: 5 }));
          }
          // Let any rejection surface (they are reported on a later turn).
          await new Promise((r) => setTimeout(r, 50));
          const expected: IdempotencyEventType[] = [
            'executed',
            'replayed',
            'mismatch',
            'conflict',
            'waited',
            'released',
          ];
          if (mode === 'lease') expected.push('taken_over');
          for (const type of expected) expect(seen).toContain(type);
          expect(unhandled).toEqual([]);
          await expectNothingHeld(
            mode === 'lease' ? [key, busy, waitedKey, released, dead] : [key, busy, waitedKey, released],
            user,
          );
          await expectKeysUsable([released], user);
        });
      }
    });
  });
});
