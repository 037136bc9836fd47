import { createTRPCClient, httpLink, type TRPCClientError } from '@trpc/client';
import {
  asyncStorageStore,
  type IdempotencyCallInfo,
  IdentityChangedError,
  idempotencyFetch,
  idempotencyHeaders,
  idempotencyLink,
  isOutcomeUnknown,
  localStorageStore,
  type PendingCallStore,
  type PendingCallsLink,
  pendingCallsLink,
  type WebStorageLike,
} from '@trpc-idempotency/client';
import { createTestDatabase, type TestDatabase } from '@trpc-idempotency/test-db';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { createTestClient, newInfo } from './support/client.ts';
import { type ClientTestRouter, createClientTestApp } from './support/client-test-app.ts';
import { type Fault, startFaultServer } from './support/fault-server.ts';

let tdb: TestDatabase;
let app: ReturnType<typeof createClientTestApp>;
let server: Awaited<ReturnType<typeof startFaultServer>>;

beforeAll(async () => {
  tdb = await createTestDatabase(inject('pgAdminUrl'));
  app = createClientTestApp(tdb.db);
  await app.setup();
  server = await startFaultServer({ router: app.router, createContext: app.createContext });
});
afterAll(async () => {
  await server?.close();
  await tdb?.drop();
});

/** Per key: the first request commits and its answer is lost, the second meets `then`, the rest pass. */
const lostThen = (then: Fault) =>
  server.setFault((req, before) => {
    const earlier = before.filter((r) => r.key === req.key).length;
    return earlier === 0 ? 'drop-after-commit' : earlier === 1 ? then : 'pass';
  });

const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => expect.unreachable('the call succeeded'),
    (error: unknown) => error as TRPCClientError<ClientTestRouter>,
  );
const statusOf = (error: TRPCClientError<ClientTestRouter>) =>
  (error.data as { httpStatus?: number } | undefined)?.httpStatus ??
  (error.meta as { response?: Response } | undefined)?.response?.status;

/** Answers that say nothing about the key: each one after a lost answer leaves the outcome unknown. */
const REFUSALS: [label: string, fault: Fault, status: number][] = [
  ["401 from the app's auth middleware (the session ended)", 'session-ended', 401],
  ["403 from the app's CSRF check", 'csrf-expired', 403],
  ['404 from an instance without the procedure (a rolling deploy)', 'procedure-gone', 404],
  ["a proxy's HTML 403 page", 'html-403', 403],
];

describe('a lost answer, then an answer that is not the key’s', () => {
  for (const [label, fault, status] of REFUSALS) {
    test(`${label}: the outcome stays unknown, and a re-send with the key replays the one payment`, async () => {
      lostThen(fault);
      const client = createTestClient(server.url);
      const info = newInfo();
      const error = await failureOf(
        client.payments.create.mutate({ amount: 7 }, { context: { idempotencyInfo: info } }),
      );
      expect(statusOf(error)).toBe(status);
      expect(info.attempts).toBe(2);
      expect(isOutcomeUnknown(error)).toBe(true);
      expect((await app.rowsPerKey()).get(info.key!)).toBe(1);

      const again = newInfo();
      const result = await client.payments.create.mutate(
        { amount: 7 },
        { context: { idempotencyKey: info.key!, idempotencyInfo: again } },
      );
      expect(result.key).toBe(info.key);
      expect(again.replayed).toBe(true);
      expect((await app.rowsPerKey()).get(info.key!)).toBe(1);
    });
  }

  test('a "try again" with the key, refused 401 on its first attempt, still leaves the outcome unknown', async () => {
    lostThen('session-ended');
    const client = createTestClient(server.url, { link: { attempts: 1 } });
    const info = newInfo();
    const lost = await failureOf(client.payments.create.mutate({ amount: 5 }, { context: { idempotencyInfo: info } }));
    expect([statusOf(lost), isOutcomeUnknown(lost)]).toEqual([undefined, true]);
    const again = await failureOf(
      client.payments.create.mutate({ amount: 5 }, { context: { idempotencyKey: info.key! } }),
    );
    expect([statusOf(again), isOutcomeUnknown(again)]).toEqual([401, true]);
    expect((await app.rowsPerKey()).get(info.key!)).toBe(1);
  });

  test('with httpBatchStreamLink too: a 401 after a lost answer is unknown, the key’s stored error is not', async () => {
    const client = createTestClient(server.url, { batch: 'stream' });
    lostThen('session-ended');
    const paid = newInfo();
    const unknown = await failureOf(
      client.payments.create.mutate({ amount: 8 }, { context: { idempotencyInfo: paid } }),
    );
    expect([statusOf(unknown), isOutcomeUnknown(unknown)]).toEqual([401, true]);

    // refund's CONFLICT is stored: its replay is the key's answer, carried in the streamed error's data.
    lostThen('pass');
    const refused = await failureOf(client.payments.refund.mutate({ id: 1 }));
    expect([statusOf(refused), isOutcomeUnknown(refused)]).toEqual([409, false]);
  });

  test('a lost answer then the key’s stored error (a replayed CONFLICT) is definitive', async () => {
    lostThen('pass');
    const client = createTestClient(server.url);
    const info = newInfo();
    const error = await failureOf(client.payments.refund.mutate({ id: 2 }, { context: { idempotencyInfo: info } }));
    expect([statusOf(error), info.attempts, info.replayed]).toEqual([409, 2, true]);
    expect(isOutcomeUnknown(error)).toBe(false);
  });

  test('a refusal with no lost answer before it is definitive: nothing ran', async () => {
    server.setFault(() => 'session-ended');
    const client = createTestClient(server.url);
    const info = newInfo();
    const error = await failureOf(client.payments.create.mutate({ amount: 9 }, { context: { idempotencyInfo: info } }));
    expect([statusOf(error), info.attempts, isOutcomeUnknown(error)]).toEqual([401, 1, false]);
    expect((await app.rowsPerKey()).get(info.key!)).toBeUndefined();
  });
});

/** A `localStorage` of the test's own: the store's behaviour over it is the browser's. */
function memoryWebStorage(): WebStorageLike {
  const data = new Map<string, string>();
  return {
    get length() {
      return data.size;
    },
    key: (i) => [...data.keys()][i] ?? null,
    getItem: (k) => data.get(k) ?? null,
    setItem: (k, v) => void data.set(k, v),
    removeItem: (k) => void data.delete(k),
  };
}

function memoryAsyncStorage() {
  const data = new Map<string, string>();
  return {
    getItem: async (k: string) => data.get(k) ?? null,
    setItem: async (k: string, v: string) => void data.set(k, v),
    removeItem: async (k: string) => void data.delete(k),
    getAllKeys: async () => [...data.keys()],
  };
}

const STORES: [string, () => PendingCallStore][] = [
  ['localStorageStore', () => localStorageStore({ storage: memoryWebStorage() })],
  ['asyncStorageStore', () => asyncStorageStore(memoryAsyncStorage())],
];

describe('pendingCallsLink keeps a call whose lost answer was followed by a 401', () => {
  for (const [name, makeStore] of STORES) {
    test(`${name}: kept, and resume() after signing in again replays the one payment`, async () => {
      const session = { user: 'u1' as string | null };
      const pending = pendingCallsLink<ClientTestRouter>({
        procedures: ['payments.create'],
        store: makeStore(),
        user: () => 'u1', // whose calls these are: kept across the session's end
      });
      const headers = idempotencyHeaders.with(() => (session.user ? { 'x-user': session.user } : {}));
      const client = createTRPCClient<ClientTestRouter>({
        links: [
          pending,
          idempotencyLink<ClientTestRouter>({ procedures: ['payments.create'], baseDelayMs: 50 }),
          httpLink({ url: server.url, headers, fetch: idempotencyFetch() }),
        ],
      });
      lostThen('session-ended');
      const info = newInfo();
      const error = await failureOf(
        client.payments.create.mutate({ amount: 11 }, { context: { idempotencyInfo: info } }),
      );
      expect(statusOf(error)).toBe(401);
      expect((await pending.list()).map((c) => c.key)).toEqual([info.key]);

      const [resumed] = await pending.resume(client);
      expect(resumed).toMatchObject({ status: 'succeeded', replayed: true, call: { key: info.key } });
      expect(await pending.list()).toEqual([]);
      expect((await app.rowsPerKey()).get(info.key!)).toBe(1);
    });
  }
});

describe("idempotencyLink's identity pin", () => {
  /** idempotencyLink pinned to `session.user`, in front of httpLink signing each request as that user. */
  const pinnedLinks = (session: { user: string }) => [
    idempotencyLink<ClientTestRouter>({
      procedures: ['payments.create'],
      baseDelayMs: 50,
      identity: () => session.user,
    }),
    httpLink({
      url: server.url,
      headers: idempotencyHeaders.with(() => ({ 'x-user': session.user })),
      fetch: idempotencyFetch(),
    }),
  ];
  /** Each key's first request commits and its answer is lost as bob signs in; the rest pass. */
  const bobSignsInAsAnswerIsLost = (session: { user: string }) =>
    server.setFault((req, before) => {
      if (before.some((r) => r.key === req.key)) return 'pass';
      session.user = 'bob';
      return 'drop-after-commit';
    });
  test('another user signing in during the backoff stops the retry: the outcome is unknown, nothing runs in their scope', async () => {
    const session = { user: 'alice' };
    const client = createTRPCClient<ClientTestRouter>({
      links: pinnedLinks(session),
    });
    bobSignsInAsAnswerIsLost(session);
    const info: IdempotencyCallInfo = newInfo();
    const error = await failureOf(
      client.payments.create.mutate({ amount: 12 }, { context: { idempotencyInfo: info } }),
    );
    expect(error.cause).toBeInstanceOf(IdentityChangedError);
    expect([info.attempts, isOutcomeUnknown(error)]).toEqual([1, true]);
    expect(server.seen.filter((r) => r.key?.includes(info.key!))).toHaveLength(1);
    expect((await app.rowsPerKey()).get(info.key!)).toBe(1);
  });

  /**
   * The README's chain with both stores: alice's payment commits, its answer is lost and bob signs in during the
   * backoff. Returns what the page keeps: the key (the hook's, a form's) and the store, for a "try again".
   */
  async function aliceLostThenBob(makeStore: () => PendingCallStore) {
    const session = { user: 'alice' };
    const store = makeStore();
    const chain = () => {
      const pending = pendingCallsLink<ClientTestRouter>({
        procedures: ['payments.create'],
        store,
        user: () => session.user,
      });
      const client = createTRPCClient<ClientTestRouter>({
        links: [pending, ...pinnedLinks(session)],
      });
      return { pending, client };
    };
    const page = chain();
    bobSignsInAsAnswerIsLost(session);
    const info = newInfo();
    const lost = await failureOf(
      page.client.payments.create.mutate({ amount: 13 }, { context: { idempotencyInfo: info } }),
    );
    expect([lost.cause instanceof IdentityChangedError, isOutcomeUnknown(lost)]).toEqual([true, true]);
    return { session, store, key: info.key!, page, reload: chain };
  }

  /** A "try again" of alice's call with its key while bob is signed in: refused, nothing sent, alice's to resume. */
  async function expectRefusedThenResumedByAlice(
    run: Awaited<ReturnType<typeof aliceLostThenBob>>,
    page: { pending: PendingCallsLink<ClientTestRouter>; client: typeof run.page.client },
  ) {
    const sentBefore = server.seen.length;
    const again = await failureOf(
      page.client.payments.create.mutate({ amount: 13 }, { context: { idempotencyKey: run.key } }),
    );
    expect(server.seen.length - sentBefore).toBe(0);
    expect([again.cause instanceof IdentityChangedError, isOutcomeUnknown(again)]).toEqual([true, true]);
    expect((await app.rowsPerKey()).get(run.key)).toBe(1);
    // Nothing of alice's is stored for bob, so bob's resume() cannot send it either; alice's record stays hers.
    expect(await page.pending.list()).toEqual([]);
    expect(await page.pending.resume(page.client)).toEqual([]);
    expect((await run.store.list('alice')).map((c) => c.key)).toEqual([run.key]);

    run.session.user = 'alice';
    const [resumed] = await page.pending.resume(page.client);
    expect(resumed).toMatchObject({ status: 'succeeded', replayed: true, call: { key: run.key } });
    expect((await app.rowsPerKey()).get(run.key)).toBe(1);
  }

  for (const [name, makeStore] of STORES) {
    test(`${name}: a "try again" with alice's key while bob is signed in is refused, outcome unknown, left for alice's resume()`, async () => {
      const run = await aliceLostThenBob(makeStore);
      await expectRefusedThenResumedByAlice(run, run.page);
    });

    test(`${name}: after a reload too, the key stays alice's: bob's "try again" with it sends nothing`, async () => {
      const run = await aliceLostThenBob(makeStore);
      await expectRefusedThenResumedByAlice(run, run.reload());
    });
  }

  test('idempotencyLink alone: a "try again" with the key under the new identity sends nothing, under alice it replays', async () => {
    const session = { user: 'alice' };
    const client = createTRPCClient<ClientTestRouter>({
      links: pinnedLinks(session),
    });
    bobSignsInAsAnswerIsLost(session);
    const info = newInfo();
    await failureOf(client.payments.create.mutate({ amount: 14 }, { context: { idempotencyInfo: info } }));
    const again = await failureOf(
      client.payments.create.mutate({ amount: 14 }, { context: { idempotencyKey: info.key! } }),
    );
    expect([again.cause instanceof IdentityChangedError, isOutcomeUnknown(again)]).toEqual([true, true]);
    expect(server.seen.filter((r) => r.key?.includes(info.key!))).toHaveLength(1);

    session.user = 'alice';
    const replay = newInfo();
    await client.payments.create.mutate(
      { amount: 14 },
      { context: { idempotencyKey: info.key!, idempotencyInfo: replay } },
    );
    expect(replay.replayed).toBe(true);
    expect((await app.rowsPerKey()).get(info.key!)).toBe(1);
  });
});
