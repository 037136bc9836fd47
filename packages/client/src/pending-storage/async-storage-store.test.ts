import { describe, expect, test } from 'vitest';
import { memoryAsyncStorage } from './__tests__/memory-async-storage.js';
import { STORE_CHECKS, storeContract } from './__tests__/store-contract.js';
import { asyncStorageStore } from './async-storage-store.js';
import { localStorageStore, type WebStorageLike } from './local-storage-store.js';

/** A Web Storage over a Map, for localStorageStore in Node. */
function mapStorage(data: Map<string, string>): WebStorageLike {
  return {
    get length() {
      return data.size;
    },
    key: (index) => [...data.keys()][index] ?? null,
    getItem: (name) => data.get(name) ?? null,
    setItem: (name, value) => void data.set(name, value),
    removeItem: (name) => void data.delete(name),
  };
}

describe('asyncStorageStore on the in-memory AsyncStorage', () => {
  test('passes every store check', async () => {
    const storage = memoryAsyncStorage();
    expect(await storeContract(() => asyncStorageStore(storage))).toEqual([...STORE_CHECKS]);
  });

  test('what one app instance stored, the next (after a kill) lists; entries of other apps are ignored', async () => {
    const storage = memoryAsyncStorage();
    await storage.setItem('trpc-idempotency:u:garbage', 'not json');
    await storage.setItem('someone-else', '{"key":"x"}');
    const call = { key: 'k', path: 'payments.create', input: '{"json":{"a":1}}', firstSentAt: 1 };
    await asyncStorageStore(storage).put('u', call);
    expect(await asyncStorageStore(storage.restart()).list('u')).toEqual([call]);
  });

  test('a custom prefix keeps two stores on one AsyncStorage apart', async () => {
    const storage = memoryAsyncStorage();
    const call = { key: 'k', path: 'p', input: '1', firstSentAt: 1 };
    await asyncStorageStore(storage, { prefix: 'app-a' }).put('u', call);
    expect(await asyncStorageStore(storage, { prefix: 'app-b' }).list('u')).toEqual([]);
    expect(await asyncStorageStore(storage, { prefix: 'app-a' }).list('u')).toEqual([call]);
  });

  // Damaged, or copied by hand.
  test('an entry whose name is not its key is never listed: remove() could never forget it', async () => {
    const call = { key: 'k-2', path: 'p', input: '1', firstSentAt: 1 };
    const storage = memoryAsyncStorage();
    await storage.setItem('trpc-idempotency:u:k-1', JSON.stringify(call));
    expect(await asyncStorageStore(storage).list('u')).toEqual([]);
    const web = new Map([['trpc-idempotency:u:k-1', JSON.stringify(call)]]);
    expect(await localStorageStore({ storage: mapStorage(web) }).list('u')).toEqual([]);
  });
});
