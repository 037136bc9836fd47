import {
  byFirstSent,
  entryNamespace,
  entryPrefix,
  type PendingCall,
  type PendingCallStore,
  storedCall,
} from './pending-call-store.js';

/**
 * The part of React Native's AsyncStorage (`@react-native-async-storage/async-storage`) the store uses:
 * pass its default export. Declared here so this package does not depend on React Native.
 */
export interface AsyncStorageLike {
  getItem(key: string): Promise<string | null>;
  setItem(key: string, value: string): Promise<void>;
  removeItem(key: string): Promise<void>;
  getAllKeys(): Promise<readonly string[]>;
}

export interface AsyncStorageStoreOptions {
  /** Prefix of every entry's name. @default 'trpc-idempotency' */
  prefix?: string;
}

/** Keeps pending calls in React Native's AsyncStorage: one entry per call, `<prefix>:<namespace>:<key>`. */
export function asyncStorageStore(storage: AsyncStorageLike, options: AsyncStorageStoreOptions = {}): PendingCallStore {
  const prefix = options.prefix ?? 'trpc-idempotency';
  const namesOf = async (namespace: string) => {
    const start = entryPrefix(prefix, namespace);
    return (await storage.getAllKeys()).filter((name) => name.startsWith(start));
  };
  return {
    async list(namespace) {
      const start = entryPrefix(prefix, namespace);
      const names = await namesOf(namespace);
      const texts = await Promise.all(names.map((name) => storage.getItem(name)));
      return texts
        .map((text, i) => storedCall(names[i]!, start, text))
        .filter((call): call is PendingCall => call !== undefined)
        .sort(byFirstSent);
    },
    put: (namespace, call) => storage.setItem(entryPrefix(prefix, namespace) + call.key, JSON.stringify(call)),
    remove: (namespace, key) => storage.removeItem(entryPrefix(prefix, namespace) + key),
    async clear(namespace) {
      await Promise.all((await namesOf(namespace)).map((name) => storage.removeItem(name)));
    },
    async namespacesOf(key) {
      const found: string[] = [];
      for (const name of await storage.getAllKeys()) {
        const namespace = entryNamespace(prefix, name, key);
        if (namespace !== undefined && storedCall(name, entryPrefix(prefix, namespace), await storage.getItem(name)))
          found.push(namespace);
      }
      return found;
    },
  };
}
