import { describe, expect, test } from 'vitest';
import { memoryAsyncStorage } from './__tests__/memoryAsyncStorage.js';
import { STORE_CHECKS, storeContract } from './__tests__/storeContract.js';
import { asyncStorageStore } from './asyncStorageStore.js';

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
});
