import type { PendingCall, PendingCallStore } from '../pending-call-store.js';

/** What every store must do; run in Node (AsyncStorage mock) and in Chromium (localStorage, IndexedDB). */
export const STORE_CHECKS = [
  'a stored call is listed with every field',
  'calls are listed oldest first',
  'putting a key again replaces the call',
  'remove forgets one call; removing an absent one is fine',
  'namespaces never see each other, even when one is a prefix of another',
  'clear forgets one namespace only',
  'a new store instance (a reload) lists what the last one stored',
  'namespacesOf names every namespace holding a key, and only for that key',
] as const;

function assertEqual(actual: unknown, expected: unknown, check: string): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${check}: got ${a}, expected ${e}`);
}

/**
 * Runs the checks on fresh stores from `makeStore` (all on the same storage). Self-contained — no
 * imports but types — so the browser test can load it as it is. Resolves with the checks that passed.
 */
export async function storeContract(makeStore: () => PendingCallStore): Promise<string[]> {
  const passed: string[] = [];
  const store = makeStore();
  const call = (key: string, firstSentAt: number, input = '{"amountCents":4000}'): PendingCall => ({
    key,
    path: 'payments.create',
    input,
    firstSentAt,
  });
  const ns = `user:${Math.random().toString(36).slice(2)}`;
  const [c1, c2, c3] = [call('k-1', 3_000), call('k-2', 1_000), call('k-3', 2_000)];

  await store.put(ns, c1!);
  assertEqual(await store.list(ns), [c1], STORE_CHECKS[0]);
  passed.push(STORE_CHECKS[0]);

  await store.put(ns, c2!);
  await store.put(ns, c3!);
  assertEqual(
    (await store.list(ns)).map((c) => c.key),
    ['k-2', 'k-3', 'k-1'],
    STORE_CHECKS[1],
  );
  passed.push(STORE_CHECKS[1]);

  const replaced = call('k-1', 3_000, '{"amountCents":4100}');
  await store.put(ns, replaced);
  const listed = await store.list(ns);
  assertEqual([listed.length, listed.find((c) => c.key === 'k-1')], [3, replaced], STORE_CHECKS[2]);
  passed.push(STORE_CHECKS[2]);

  await store.remove(ns, 'k-2');
  await store.remove(ns, 'never-stored');
  assertEqual(
    (await store.list(ns)).map((c) => c.key),
    ['k-3', 'k-1'],
    STORE_CHECKS[3],
  );
  passed.push(STORE_CHECKS[3]);

  const other = `${ns}:2`; // `ns` is a prefix of it
  await store.put(other, call('k-other', 500));
  assertEqual(
    (await store.list(ns)).map((c) => c.key),
    ['k-3', 'k-1'],
    STORE_CHECKS[4],
  );
  assertEqual(
    (await store.list(other)).map((c) => c.key),
    ['k-other'],
    STORE_CHECKS[4],
  );
  passed.push(STORE_CHECKS[4]);

  await store.clear(ns);
  assertEqual([(await store.list(ns)).length, (await store.list(other)).length], [0, 1], STORE_CHECKS[5]);
  passed.push(STORE_CHECKS[5]);

  await store.put(ns, c1!);
  assertEqual(await makeStore().list(ns), [c1], STORE_CHECKS[6]);
  passed.push(STORE_CHECKS[6]);

  // `ns` and `other` hold k-1; a key that ends like another (`1` of `k-1`) or holds ':' is told apart.
  await store.put(other, call('k-1', 600));
  await store.put(other, call('a:k-1', 700));
  assertEqual(
    [
      (await makeStore().namespacesOf('k-1')).sort(),
      await store.namespacesOf('1'),
      await store.namespacesOf('a:k-1'),
      await store.namespacesOf('never-stored'),
    ],
    [[ns, other].sort(), [], [other], []],
    STORE_CHECKS[7],
  );
  await store.clear(ns);
  await store.clear(other);
  passed.push(STORE_CHECKS[7]);
  return passed;
}
