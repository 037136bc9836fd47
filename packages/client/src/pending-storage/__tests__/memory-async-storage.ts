import type { AsyncStorageLike } from '../async-storage-store.js';

/**
 * An in-memory stand-in for React Native's AsyncStorage with its contract: every method is async, values
 * are strings, and `getAllKeys` lists what is there now. `restart()` models an app kill: the same data, a
 * new instance.
 */
export interface MemoryAsyncStorage extends AsyncStorageLike {
  data: Map<string, string>;
  restart(): MemoryAsyncStorage;
}

export function memoryAsyncStorage(data = new Map<string, string>()): MemoryAsyncStorage {
  const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));
  return {
    data,
    async getItem(key) {
      await tick();
      return data.get(key) ?? null;
    },
    async setItem(key, value) {
      if (typeof value !== 'string') throw new TypeError('AsyncStorage stores strings only');
      await tick();
      data.set(key, value);
    },
    async removeItem(key) {
      await tick();
      data.delete(key);
    },
    async getAllKeys() {
      await tick();
      return [...data.keys()];
    },
    restart: () => memoryAsyncStorage(data),
  };
}
