import { createTRPCUntypedClient, type Operation, type TRPCLink } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import superjson from 'superjson';
import { describe, expect, test } from 'vitest';
import { type Answer, ok, scriptedLink } from './__tests__/scripted-link.js';
import { idempotencyHeaders } from './idempotency-headers.js';
import { idempotencyLink } from './idempotency-link.js';
import { callWithIdempotencyContext } from './internals/ambient-context.js';
import { isOutcomeUnknown } from './is-outcome-unknown.js';
import type { PendingCallsLinkOptions } from './pending-calls/options.js';
import { pendingCallsLink } from './pending-calls-link.js';
import { memoryAsyncStorage } from './pending-storage/__tests__/memory-async-storage.js';
import { asyncStorageStore } from './pending-storage/async-storage-store.js';
import type { PendingCall, PendingCallStore } from './pending-storage/pending-call-store.js';

const lost: Answer = 'network';

/** A store whose methods the test scripts; the others list nothing and do nothing. */
const storeOf = (parts: Partial<PendingCallStore> = {}): PendingCallStore => ({
  list: async () => [],
  put: async () => {},
  remove: async () => {},
  clear: async () => {},
  namespacesOf: async () => [],
  ...parts,
});

/** A client whose link chain is pendingCallsLink → idempotencyLink (no backoff) → a scripted server. */
function setup(
  script: (attempt: number, op: Operation) => Answer,
  opts: Partial<PendingCallsLinkOptions<any>> = {},
  storage = memoryAsyncStorage(),
) {
  const server = scriptedLink(script);
  const store = asyncStorageStore(storage);
  const pending = pendingCallsLink<any>({ procedures: ['pay'], store, ...opts });
  const client = createTRPCUntypedClient({
    links: [
      pending,
      idempotencyLink<any>({ procedures: ['pay'], attempts: 2, baseDelayMs: 0, budget: false }),
      server.link,
    ],
  });
  return { client, pending, store, storage, seen: server.seen };
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

describe('recording', () => {
  test('a keyed call is stored, input through the transformer, before its first attempt', async () => {
    let storedAtFirstAttempt: PendingCall[] | undefined;
    const storage = memoryAsyncStorage();
    const { client, store } = setup(
      (n) => {
        // The terminating link runs when the attempt is sent: copy what the storage holds right then.
        if (n === 1) storedAtFirstAttempt = [...storage.data.values()].map((text) => JSON.parse(text));
        return lost;
      },
      { transformer: superjson, user: () => 'u1' },
      storage,
    );
    const at = new Date(Date.UTC(2026, 0, 2));
    const result = await outcome(client.mutation('pay', { amountCents: 4000, at }));
    expect(isOutcomeUnknown((result as { error: unknown }).error)).toBe(true);
    const stored = await store.list('u1');
    expect(storedAtFirstAttempt).toEqual(stored);
    expect(stored).toHaveLength(1);
    expect(superjson.deserialize(JSON.parse(stored[0]!.input))).toEqual({ amountCents: 4000, at });
    expect(stored[0]!.path).toBe('pay');
  });

  test('isOutcomeUnknown is false for an error no call produced (nothing sent), by name across copies', async () => {
    const { client } = setup(() => lost);
    const unknown = (await outcome(client.mutation('pay', { n: 1 }))) as { error: Error };
    expect(isOutcomeUnknown(unknown.error)).toBe(true);
    expect(isOutcomeUnknown(new Error('the changed input was not sent'))).toBe(false);
    expect(isOutcomeUnknown('offline')).toBe(false);
    // A TRPCClientError from a second copy of @trpc/client: told by its name, still unknown.
    const copy = Object.assign(new Error(unknown.error.message), { name: 'TRPCClientError' });
    expect(isOutcomeUnknown(copy)).toBe(true);
  });

  test('a success and a definitive error forget the call; a lost answer keeps it', async () => {
    const answers: Answer[] = [ok('paid'), { status: 402 }, lost, lost];
    const { client, store, seen } = setup(() => answers[seen.length - 1]!);
    expect(await outcome(client.mutation('pay', { n: 1 }))).toEqual({ value: 'paid' });
    expect(await store.list('default')).toEqual([]);
    const declined = await outcome(client.mutation('pay', { n: 2 }));
    expect(isOutcomeUnknown((declined as { error: unknown }).error)).toBe(false);
    expect(await store.list('default')).toEqual([]);
    const unknown = await outcome(client.mutation('pay', { n: 3 }));
    expect(isOutcomeUnknown((unknown as { error: unknown }).error)).toBe(true);
    const kept = await store.list('default');
    expect(kept.map((c) => [c.key, c.input])).toEqual([[seen[2]!.op.context.idempotencyKey, '{"n":3}']]);
  });

  test('nothing is stored without a store, nor while the user is signed out', async () => {
    const storage = memoryAsyncStorage();
    const bare = setup(() => lost, { store: undefined }, storage);
    await outcome(bare.client.mutation('pay', {}));
    const signedOut = setup(() => lost, { user: () => null }, storage);
    await outcome(signedOut.client.mutation('pay', {}));
    expect(storage.data.size).toBe(0);
  });

  test('queries and unlisted mutations pass untouched: no key, nothing stored', async () => {
    const { client, seen, storage } = setup(() => ok());
    await client.query('pay', {});
    await client.mutation('other', {});
    expect(seen.map((s) => s.op.context.idempotencyKey)).toEqual([undefined, undefined]);
    expect(storage.data.size).toBe(0);
  });
});

describe('a failing store or hook never holds the call', () => {
  const within = <T>(p: Promise<T>, ms = 2000) =>
    Promise.race([p, new Promise<'still pending'>((resolve) => setTimeout(() => resolve('still pending'), ms))]);

  test('an onStoreError that throws: the call is still sent and settles', async () => {
    const full = storeOf({ put: () => Promise.reject(new Error('QuotaExceededError')) });
    const { client, seen } = setup(() => ok('paid'), {
      store: full,
      onStoreError: () => {
        throw new Error('hook threw');
      },
    });
    expect(await within(outcome(client.mutation('pay', {})))).toEqual({ value: 'paid' });
    expect(seen).toHaveLength(1);
  });

  test('a put() that throws synchronously: the call is still sent, and the hook is told', async () => {
    const told: unknown[] = [];
    const broken = storeOf({
      put: () => {
        throw new Error('storage unavailable');
      },
    });
    const { client, seen } = setup(() => ok('paid'), { store: broken, onStoreError: (e) => told.push(e) });
    expect(await within(outcome(client.mutation('pay', {})))).toEqual({ value: 'paid' });
    expect(seen).toHaveLength(1);
    expect(told).toEqual([new Error('storage unavailable')]);
  });

  test('a remove() that throws synchronously: the answer still reaches the caller, and the hook is told', async () => {
    const told: unknown[] = [];
    const broken = storeOf({
      remove: () => {
        throw new Error('remove failed');
      },
    });
    const { client } = setup(() => ok('paid'), { store: broken, onStoreError: (e) => told.push(e) });
    expect(await within(outcome(client.mutation('pay', {})))).toEqual({ value: 'paid' });
    const declined = setup(() => ({ status: 402 }), { store: broken, onStoreError: (e) => told.push(e) });
    const refused = await within(outcome(declined.client.mutation('pay', {})));
    expect(refused).not.toBe('still pending');
    expect(isOutcomeUnknown((refused as { error: unknown }).error)).toBe(false);
    expect(told).toEqual([new Error('remove failed'), new Error('remove failed')]);
  });

  test('an abort while the store write is pending fails the call at once with its reason, sends nothing', async () => {
    const blocked = storeOf({ put: () => new Promise<void>(() => {}) });
    const { client, seen } = setup(() => ok('paid'), { store: blocked });
    const controller = new AbortController();
    const call = outcome(client.mutation('pay', {}, { signal: controller.signal }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    controller.abort(new Error('user cancelled'));
    const result = await within(call, 500);
    expect(result).not.toBe('still pending');
    expect((result as { error: Error }).error.message).toBe('user cancelled');
    expect(isOutcomeUnknown((result as { error: unknown }).error)).toBe(true);
    expect(seen).toHaveLength(0);
    // Already aborted when the call starts: the same, at once.
    const already = outcome(client.mutation('pay', {}, { signal: AbortSignal.abort(new Error('gone')) }));
    expect(((await within(already, 500)) as { error: Error }).error.message).toBe('gone');
    expect(seen).toHaveLength(0);
  });
});

describe('a store that never answers never holds the call', () => {
  const never = () => new Promise<void>(() => {});
  const within = <T>(p: Promise<T>, ms: number) =>
    Promise.race([p, new Promise<'still pending'>((resolve) => setTimeout(() => resolve('still pending'), ms))]);

  // The answer is a success or a definitive error.
  test('a remove() that never settles: the answer arrives after storeTimeoutMs, the hook told', async () => {
    const told: unknown[] = [];
    const opts = { store: storeOf({ remove: never }), storeTimeoutMs: 50, onStoreError: (e: unknown) => told.push(e) };
    const paid = setup(() => ok('paid'), opts);
    expect(await within(outcome(paid.client.mutation('pay', {})), 1000)).toEqual({ value: 'paid' });
    const declined = setup(() => ({ status: 402 }), opts);
    const refused = await within(outcome(declined.client.mutation('pay', {})), 1000);
    expect(refused).not.toBe('still pending');
    expect(isOutcomeUnknown((refused as { error: unknown }).error)).toBe(false);
    expect(told).toHaveLength(2);
    expect(String(told[0])).toMatch(/remove.*storeTimeoutMs/);
  });

  test('an abort while the answer waits on a remove() that never settles delivers the answer at once', async () => {
    const { client } = setup(() => ok('paid'), { store: storeOf({ remove: never }), onStoreError: () => {} });
    const controller = new AbortController();
    const call = outcome(client.mutation('pay', {}, { signal: controller.signal }));
    await new Promise((resolve) => setTimeout(resolve, 30));
    controller.abort(new Error('user cancelled'));
    // The server answered: the abort cannot undo the payment, so the caller learns of it rather than "aborted".
    expect(await within(call, 300)).toEqual({ value: 'paid' });
  });

  test('a put() that never settles: the call is sent after storeTimeoutMs, the hook told', async () => {
    const told: unknown[] = [];
    const { client, seen } = setup(() => ok('paid'), {
      store: storeOf({ put: never }),
      storeTimeoutMs: 50,
      onStoreError: (e) => told.push(e),
    });
    expect(await within(outcome(client.mutation('pay', {})), 1000)).toEqual({ value: 'paid' });
    expect(seen).toHaveLength(1);
    expect(String(told[0])).toMatch(/put.*storeTimeoutMs/);
  });

  // Else resume() would find a stale call.
  test('a put() that lands after the call got its definitive answer is forgotten then: no stale call', async () => {
    const real = asyncStorageStore(memoryAsyncStorage());
    let land = () => {};
    const late = {
      ...real,
      put: (ns: string, call: PendingCall) =>
        new Promise<void>((resolve) => {
          land = () => void real.put(ns, call).then(resolve);
        }),
    };
    const { client } = setup(() => ok('paid'), { store: late, storeTimeoutMs: 30, onStoreError: () => {} });
    expect(await within(outcome(client.mutation('pay', {})), 1000)).toEqual({ value: 'paid' });
    land();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(await real.list('default')).toEqual([]);
  });
});

describe('two calls under one key', () => {
  /** A store over memory whose puts wait until `open()`, in order. */
  function gatedStore() {
    const real = asyncStorageStore(memoryAsyncStorage());
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    return {
      real,
      open,
      store: { ...real, put: (ns: string, call: PendingCall) => gate.then(() => real.put(ns, call)) },
    };
  }

  test("one aborted before its first attempt never forgets the other's pending call", async () => {
    const { real, open, store } = gatedStore();
    const { client, seen } = setup(() => lost, { store });
    const controller = new AbortController();
    const context = { idempotencyKey: 'k-shared-0001' };
    const aborted = outcome(client.mutation('pay', { n: 1 }, { context, signal: controller.signal }));
    const sent = outcome(client.mutation('pay', { n: 1 }, { context }));
    controller.abort(new Error('second click cancelled'));
    open();
    await aborted;
    const result = await sent;
    expect(isOutcomeUnknown((result as { error: unknown }).error)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(seen.length).toBeGreaterThan(0);
    // The call that was sent has no answer: it must still be there for resume().
    expect((await real.list('default')).map((c) => c.key)).toEqual(['k-shared-0001']);
  });

  test('a "try again" aborted before its first attempt keeps the earlier attempt\'s unknown call', async () => {
    const real = asyncStorageStore(memoryAsyncStorage());
    let held = false;
    let open = () => {};
    const store = {
      ...real,
      put: (ns: string, call: PendingCall) =>
        held
          ? new Promise<void>((resolve) => (open = () => void real.put(ns, call).then(resolve)))
          : real.put(ns, call),
    };
    const { client } = setup(() => lost, { store });
    const context = { idempotencyKey: 'k-again-0001' };
    const first = await outcome(client.mutation('pay', { n: 1 }, { context }));
    expect(isOutcomeUnknown((first as { error: unknown }).error)).toBe(true);
    held = true;
    const controller = new AbortController();
    const again = outcome(client.mutation('pay', { n: 1 }, { context, signal: controller.signal }));
    controller.abort(new Error('cancelled'));
    await again;
    open();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect((await real.list('default')).map((c) => c.key)).toEqual(['k-again-0001']);
  });
});

describe('what is kept', () => {
  /**
   * The link on its own, subscribed to one call of `pay`, over a terminating `next` that counts what reaches it
   * and never answers: the call stays in flight until unsubscribed.
   */
  function subscribeAlone(store: PendingCallStore) {
    let sent = 0;
    const run = pendingCallsLink<any>({ procedures: ['pay'], store })({} as never);
    const op = { id: 1, type: 'mutation', path: 'pay', input: {}, context: {}, signal: null } as Operation;
    const subscription = run({
      op,
      next: () =>
        observable(() => {
          sent++;
        }),
    }).subscribe({});
    return { subscription, sent: () => sent };
  }

  test('a FormData input is sent, not kept (it would be stored as "{}" and resumed as another payload)', async () => {
    const told: unknown[] = [];
    const { client, seen, store } = setup(() => lost, { onStoreError: (e) => told.push(e) });
    const form = new FormData();
    form.append('amount', '10');
    await outcome(client.mutation('pay', form));
    expect(seen.length).toBeGreaterThan(0);
    expect(await store.list('default')).toEqual([]);
    expect(String(told[0])).toMatch(/cannot be stored/);
  });

  test('unsubscribed while the store write is pending: nothing sent, and the call is not kept', async () => {
    let finishPut = () => {};
    const real = asyncStorageStore(memoryAsyncStorage());
    const slow = {
      ...real,
      put: (ns: string, call: PendingCall) =>
        new Promise<void>((resolve) => {
          finishPut = () => void real.put(ns, call).then(resolve);
        }),
    };
    const { subscription, sent } = subscribeAlone(slow);
    await new Promise((resolve) => setTimeout(resolve, 10));
    subscription.unsubscribe();
    finishPut();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sent()).toBe(0);
    expect(await real.list('default')).toEqual([]);
  });

  test('unsubscribed once in flight: the call was sent, so it stays kept (its outcome is unknown)', async () => {
    const real = asyncStorageStore(memoryAsyncStorage());
    const { subscription, sent } = subscribeAlone(real);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(sent()).toBe(1);
    subscription.unsubscribe();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await real.list('default')).map((c) => c.path)).toEqual(['pay']);
  });
});

describe('keys', () => {
  test('the key offered through callWithIdempotencyContext reaches every attempt, once', async () => {
    let sendsOfFirst = 0;
    // The first call's first attempt loses its answer, so it is sent twice.
    const { client, seen } = setup((_, op) =>
      (op.input as { n: number }).n === 1 && sendsOfFirst++ === 0 ? lost : ok(),
    );
    const { value, delivered } = callWithIdempotencyContext({ idempotencyKey: 'action-1' }, () => {
      const first = client.mutation('pay', { n: 1 });
      const second = client.mutation('pay', { n: 2 }); // started in the same function: not the action's
      return Promise.all([first, second]);
    });
    await value;
    expect(delivered).toBe(true);
    const keys = seen.map((s) => [(s.op.input as { n: number }).n, s.op.context.idempotencyKey]);
    expect(keys.filter(([n]) => n === 1).map(([, k]) => k)).toEqual(['action-1', 'action-1']);
    expect(keys.find(([n]) => n === 2)![1]).not.toBe('action-1');
  });

  test('an offered key is not delivered when no keyed call starts', () => {
    const { delivered } = callWithIdempotencyContext({ idempotencyKey: 'k' }, () => 1);
    expect(delivered).toBe(false);
  });

  test('a caller or generated key that is not a string fails the call before anything is stored or sent', async () => {
    const { client, seen, store } = setup(() => ok('paid'));
    const given = await outcome(client.mutation('pay', {}, { context: { idempotencyKey: 123 as unknown as string } }));
    expect(String((given as { error: unknown }).error)).toMatch(/visible ASCII/);
    const generated = setup(() => ok('paid'), { generateKey: () => 42 as unknown as string });
    const made = await outcome(generated.client.mutation('pay', {}));
    expect(String((made as { error: unknown }).error)).toMatch(/visible ASCII/);
    expect([seen.length, generated.seen.length]).toEqual([0, 0]);
    expect([await store.list('default'), await generated.store.list('default')]).toEqual([[], []]);
  });

  test('a "try again" under the same key keeps the time the key was first sent', async () => {
    const { client, store, seen } = setup(() => lost);
    await outcome(client.mutation('pay', {}, { context: { idempotencyKey: 'k' } }));
    const first = (await store.list('default'))[0]!.firstSentAt;
    await new Promise((r) => setTimeout(r, 5));
    await outcome(client.mutation('pay', {}, { context: { idempotencyKey: 'k' } }));
    expect((await store.list('default'))[0]!.firstSentAt).toBe(first);
    expect(seen.every((s) => s.op.context.idempotencyFirstSentAt === first)).toBe(true);
  });
});

describe('resume', () => {
  test('re-sends each stored call with its own key and input, reports how it ended, and forgets it', async () => {
    const storage = memoryAsyncStorage();
    const before = setup(() => lost, { transformer: superjson }, storage);
    await outcome(before.client.mutation('pay', { amountCents: 4000, at: new Date(5) }));
    const [stored] = await before.store.list('default');

    // A reload: a new client and link on the same storage.
    const after = setup(() => ok({ id: 7 }), { transformer: superjson }, storage.restart());
    const resumed = await after.pending.resume(after.client);
    expect(resumed).toEqual([
      {
        status: 'succeeded',
        call: stored,
        input: { amountCents: 4000, at: new Date(5) },
        data: { id: 7 },
        replayed: false,
      },
    ]);
    expect(after.seen.map((s) => s.op.context.idempotencyKey)).toEqual([stored!.key]);
    expect(await after.store.list('default')).toEqual([]);
  });

  test('a call older than the ttl (less the margin) is reported expired and never sent', async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const old: PendingCall = { key: 'old', path: 'pay', input: '{}', firstSentAt: Date.now() - 3_600_000 + 30_000 };
    await store.put('default', old);
    const { client, pending, seen } = setup(() => ok(), { ttlMs: 3_600_000 }, storage);
    expect(await pending.resume(client)).toEqual([{ status: 'expired', call: old, input: {} }]);
    expect(seen).toHaveLength(0);
    expect(await store.list('default')).toEqual([]);
  });

  // A device clock set ahead, then corrected.
  test('a call first sent "in the future" is of unknown age: expired', async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const ahead: PendingCall = { key: 'ahead', path: 'pay', input: '{}', firstSentAt: Date.now() + 10 * 86_400_000 };
    await store.put('default', ahead);
    const { client, pending, seen } = setup(() => ok(), {}, storage);
    expect(await pending.resume(client)).toEqual([{ status: 'expired', call: ahead, input: {} }]);
    expect(seen).toHaveLength(0);
    expect(await store.list('default')).toEqual([]);
  });

  test('a stored call whose key is not a key is reported failed, forgotten and never sent', async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const bad: PendingCall = { key: 'k bad', path: 'pay', input: '{}', firstSentAt: Date.now() };
    await store.put('default', bad);
    const { client, pending, seen } = setup(() => ok(), {}, storage);
    const [report] = await pending.resume(client);
    expect(report?.status).toBe('failed');
    expect(seen).toHaveLength(0);
    expect(await store.list('default')).toEqual([]);
  });

  test('a stored call whose first-sent time is not a number is of unknown age: expired, never sent', async () => {
    // A custom store hands back what it holds as it is (the built-in ones list such a time as NaN).
    const damaged = { key: 'nan', path: 'pay', input: '{}', firstSentAt: Number.NaN } as PendingCall;
    const custom = storeOf({ list: async () => [damaged] });
    const { client, pending, seen } = setup(() => ok(), { store: custom });
    expect((await pending.resume(client)).map((r) => r.status)).toEqual(['expired']);
    expect(seen).toHaveLength(0);
  });

  test('a first-sent time that is a numeric string (a custom store) is of unknown age: expired, unsent', async () => {
    const damaged = {
      key: 'text',
      path: 'pay',
      input: '{}',
      firstSentAt: String(Date.now()),
    } as unknown as PendingCall;
    const custom = storeOf({ list: async () => [damaged] });
    const { client, pending, seen } = setup(() => ok(), { store: custom });
    expect((await pending.resume(client)).map((r) => r.status)).toEqual(['expired']);
    expect(seen).toHaveLength(0);
  });

  test('a built-in store entry with a damaged first-sent time is reported expired and forgotten', async () => {
    // Found by an outside review: the built-in stores skipped such an entry when reading it, so it was never
    // reported and never removed.
    const storage = memoryAsyncStorage();
    const damaged = [
      ['k-str-0001', '"123"'],
      ['k-null-001', 'null'],
      ['k-none-001', undefined],
    ] as const;
    for (const [key, at] of damaged) {
      const fields = `"key":"${key}","path":"pay","input":"{}"${at === undefined ? '' : `,"firstSentAt":${at}`}`;
      await storage.setItem(`trpc-idempotency:default:${key}`, `{${fields}}`);
    }
    const { client, pending, seen } = setup(() => ok(), {}, storage);
    const resumed = await pending.resume(client);
    expect(resumed.map((r) => [r.call.key, r.status]).sort()).toEqual(damaged.map(([key]) => [key, 'expired']).sort());
    expect(seen).toHaveLength(0);
    expect(await pending.list()).toEqual([]);
  });

  test('a list() or remove() that never settles never holds resume(), nor the key for a later resume', async () => {
    const never = () => new Promise<never>(() => {});
    const old: PendingCall = { key: 'k-hung-0001', path: 'pay', input: '{}', firstSentAt: 1 };
    const within = <T>(p: Promise<T>) =>
      Promise.race([p, new Promise<'still pending'>((resolve) => setTimeout(() => resolve('still pending'), 1000))]);
    const hungRemove = storeOf({ list: async () => [old], remove: never });
    const first = setup(() => ok(), { store: hungRemove, storeTimeoutMs: 50, onStoreError: () => {} });
    expect(await within(first.pending.resume(first.client))).toEqual([{ status: 'expired', call: old, input: {} }]);
    // The key's lock was let go: a second resume of the same key is not stuck behind the first.
    expect(await within(first.pending.resume(first.client))).not.toBe('still pending');
    const hungList = storeOf({ list: never });
    const second = setup(() => ok(), { store: hungList, storeTimeoutMs: 50, onStoreError: () => {} });
    expect(await within(second.pending.resume(second.client))).toEqual([]);
  });

  test("a caller's key stored by an earlier page load keeps that load's first-sent time: its age is kept", async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const firstSentAt = Date.now() - 50_000;
    const earlier: PendingCall = { key: 'k-kept-0001', path: 'pay', input: '{"n":1}', firstSentAt };
    await store.put('default', earlier);
    // After the reload, the form submits again under the key it kept; the answer is lost again.
    const { client, seen } = setup(() => lost, {}, storage.restart());
    await outcome(client.mutation('pay', { n: 1 }, { context: { idempotencyKey: 'k-kept-0001' } }));
    expect(seen[0]!.op.context.idempotencyFirstSentAt).toBe(firstSentAt);
    expect((await store.list('default')).map((c) => c.firstSentAt)).toEqual([firstSentAt]);
  });

  test("a caller's key stored by an earlier page load past the ttl is never sent: its key may be gone", async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const earlier: PendingCall = {
      key: 'k-old-0001',
      path: 'pay',
      input: '{"n":1}',
      firstSentAt: Date.now() - 7_200_000,
    };
    await store.put('default', earlier);
    const { client, seen } = setup(() => ok(), { ttlMs: 3_600_000 }, storage.restart());
    const result = await outcome(client.mutation('pay', { n: 1 }, { context: { idempotencyKey: 'k-old-0001' } }));
    expect(seen).toHaveLength(0);
    expect(String((result as { error: unknown }).error)).toMatch(/first sent.*ttl/);
    // Left for resume() to report as expired.
    expect(await store.list('default')).toEqual([earlier]);
  });

  // Until a send under the key succeeds, the earlier page load's call is kept.
  test("a caller's key from an earlier load with another input keeps that call until a send succeeds", async () => {
    // Found by an outside review: the earlier load's call (charged, answer lost) was written over by the edited input
    // and then forgotten on the server's 422, so resume() never reported the charge that happened.
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const earlier: PendingCall = { key: 'k-edit-0001', path: 'pay', input: '{"n":1}', firstSentAt: Date.now() - 1000 };
    for (const [answer, kept] of [
      [{ status: 422 }, [earlier]],
      [lost, [earlier]],
      [ok(), []],
    ] as const) {
      await store.clear('default');
      await store.put('default', earlier);
      const { client, seen } = setup(() => answer, {}, storage.restart());
      await outcome(client.mutation('pay', { n: 2 }, { context: { idempotencyKey: 'k-edit-0001' } }));
      expect(seen.length).toBeGreaterThan(0);
      expect(await store.list('default'), JSON.stringify(answer)).toEqual(kept);
    }
  });

  test("an earlier page load's call is kept when another input sent under its key gets the key's 422", async () => {
    // The server's payload_mismatch is the key's own answer, hence definitive; it says the key ran with the earlier
    // input, whose record alone can tell resume() so.
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const earlier: PendingCall = { key: 'k-edit-0002', path: 'pay', input: '{"n":1}', firstSentAt: Date.now() - 1000 };
    await store.put('default', earlier);
    const mismatch: Answer = { status: 422, reason: 'payload_mismatch', keyAnswer: true };
    const { client, seen } = setup(() => mismatch, {}, storage.restart());
    const result = await outcome(client.mutation('pay', { n: 2 }, { context: { idempotencyKey: 'k-edit-0002' } }));
    expect(isOutcomeUnknown((result as { error: unknown }).error)).toBe(false);
    expect(seen).toHaveLength(1);
    expect(await store.list('default')).toEqual([earlier]);
  });

  test("a caller's key cancelled while the link looks for an earlier load's call: nothing stored or sent", async () => {
    const real = asyncStorageStore(memoryAsyncStorage());
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    // The lookup asks whose the key is, then lists that namespace: both wait.
    const store = {
      ...real,
      list: (ns: string) => gate.then(() => real.list(ns)),
      namespacesOf: (key: string) => gate.then(() => real.namespacesOf(key)),
    };
    const { client, seen } = setup(() => ok(), { store });
    const controller = new AbortController();
    const call = outcome(
      client.mutation('pay', { n: 1 }, { context: { idempotencyKey: 'k-look-0001' }, signal: controller.signal }),
    );
    await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort(new Error('cancelled'));
    expect(String(((await call) as { error: unknown }).error)).toMatch(/cancelled/);
    open();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(seen).toHaveLength(0);
    expect(await real.list('default')).toEqual([]);
  });

  test("an earlier page load's call is kept when its key, sent again, is aborted before any attempt", async () => {
    const storage = memoryAsyncStorage();
    const real = asyncStorageStore(storage);
    const earlier: PendingCall = { key: 'k-prev-0001', path: 'pay', input: '{"n":1}', firstSentAt: Date.now() - 1000 };
    await real.put('default', earlier);
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const slow = { ...real, put: (ns: string, call: PendingCall) => gate.then(() => real.put(ns, call)) };
    const { client, seen } = setup(() => ok(), { store: slow });
    const controller = new AbortController();
    const call = outcome(
      client.mutation('pay', { n: 1 }, { context: { idempotencyKey: 'k-prev-0001' }, signal: controller.signal }),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    controller.abort(new Error('cancelled'));
    await call;
    open();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(seen).toHaveLength(0);
    expect((await real.list('default')).map((c) => c.key)).toEqual(['k-prev-0001']);
  });

  test('a definitive error is reported failed and forgotten; a still-lost answer, unknown and kept', async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    const now = Date.now();
    await store.put('default', { key: 'declined', path: 'pay', input: '{"n":1}', firstSentAt: now });
    await store.put('default', { key: 'offline', path: 'pay', input: '{"n":2}', firstSentAt: now + 1 });
    const { client, pending } = setup(
      // The decline is the key's stored error, as the server's formatter marks it.
      (_, op) => (op.context.idempotencyKey === 'declined' ? { status: 402, keyAnswer: true } : lost),
      {},
      storage,
    );
    const resumed = await pending.resume(client);
    expect(resumed.map((r) => [r.call.key, r.status])).toEqual([
      ['declined', 'failed'],
      ['offline', 'unknown'],
    ]);
    expect((await store.list('default')).map((c) => c.key)).toEqual(['offline']);
  });

  test('a resumed call refused with an answer not the key’s (a 401: signed out) stays unknown and kept', async () => {
    const storage = memoryAsyncStorage();
    const store = asyncStorageStore(storage);
    await store.put('default', { key: 'k-401', path: 'pay', input: '{"n":1}', firstSentAt: Date.now() });
    const { client, pending } = setup(() => ({ status: 401 }), {}, storage);
    const [resumed] = await pending.resume(client);
    expect(resumed?.status).toBe('unknown');
    expect((await store.list('default')).map((c) => c.key)).toEqual(['k-401']);
  });

  test("calls are per user: one user's are neither resumed nor cleared for another", async () => {
    const storage = memoryAsyncStorage();
    let user = 'alice';
    const { client, pending, seen } = setup(() => lost, { user: () => user }, storage);
    await outcome(client.mutation('pay', { who: 'alice' }));
    user = 'bob';
    expect(await pending.list()).toEqual([]);
    expect(await pending.resume(client)).toEqual([]);
    const sent = seen.length;
    await pending.clear(); // bob signs out
    user = 'alice';
    expect((await pending.list()).map((c) => c.input)).toEqual(['{"who":"alice"}']);
    await pending.clear('alice');
    expect(await pending.list()).toEqual([]);
    expect(seen).toHaveLength(sent);
  });

  test('two resumes of the same call never send it at the same time (in-process lock without Web Locks)', async () => {
    const storage = memoryAsyncStorage();
    await asyncStorageStore(storage).put('default', { key: 'k', path: 'pay', input: '{}', firstSentAt: Date.now() });
    // Two "tabs": two clients and links on one storage, over a server that answers after 20 ms.
    let inFlight = 0;
    let overlapped = false;
    const sent: string[] = [];
    const slowServer: TRPCLink<any> =
      () =>
      ({ op }) =>
        observable((observer) => {
          inFlight++;
          overlapped ||= inFlight > 1;
          sent.push(String(op.context.idempotencyKey));
          const timer = setTimeout(() => {
            inFlight--;
            observer.next({ result: { type: 'data', data: 'paid' } });
            observer.complete();
          }, 20);
          return () => clearTimeout(timer);
        });
    const tab = () => {
      const pending = pendingCallsLink<any>({ procedures: ['pay'], store: asyncStorageStore(storage.restart()) });
      const client = createTRPCUntypedClient({
        links: [pending, idempotencyLink<any>({ procedures: ['pay'], budget: false }), slowServer],
      });
      return { pending, client };
    };
    const tabs = [tab(), tab()];
    const results = await Promise.all(tabs.map((t) => t.pending.resume(t.client)));
    expect(results.flat().map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    expect(sent).toEqual(['k', 'k']);
    expect(overlapped).toBe(false);
    expect(inFlight).toBe(0);
  });
});

test('a stored call whose path is no longer keyed is never re-sent: reported failed and forgotten', async () => {
  const storage = memoryAsyncStorage();
  const store = asyncStorageStore(storage);
  await store.put('default', { key: 'k', path: 'refunds.issue', input: '{}', firstSentAt: Date.now() });
  const { client, pending, seen } = setup(() => ok(), {}, storage);
  const [resumed] = await pending.resume(client);
  expect(resumed?.status).toBe('failed');
  expect(seen).toHaveLength(0);
  expect(await store.list('default')).toEqual([]);
});

test('an input-keyed call is stored, and resumed with its own input and no key header', async () => {
  const storage = memoryAsyncStorage();
  const start = (script: (attempt: number) => Answer, from = storage) => {
    const server = scriptedLink(script);
    const pending = pendingCallsLink<any>({
      procedures: [],
      inputKeyed: ['orders.place'],
      store: asyncStorageStore(from),
    });
    const client = createTRPCUntypedClient({
      links: [
        pending,
        idempotencyLink<any>({
          procedures: [],
          inputKeyed: ['orders.place'],
          attempts: 2,
          baseDelayMs: 0,
          budget: false,
        }),
        server.link,
      ],
    });
    return { client, pending, seen: server.seen };
  };
  const before = start(() => lost);
  const lostCall = (await outcome(before.client.mutation('orders.place', { orderId: 'o-9' }))) as { error: unknown };
  expect(isOutcomeUnknown(lostCall.error)).toBe(true);
  const [stored] = await before.pending.list();
  expect(stored).toMatchObject({ path: 'orders.place', input: '{"orderId":"o-9"}' });

  const after = start(() => ok('placed'), storage.restart());
  const [resumed] = await after.pending.resume(after.client);
  expect(resumed).toMatchObject({ status: 'succeeded', data: 'placed', input: { orderId: 'o-9' } });
  expect([...before.seen, ...after.seen].map(({ op }) => idempotencyHeaders({ op }))).toEqual([{}, {}, {}]);
  expect(await after.pending.list()).toEqual([]);
});
