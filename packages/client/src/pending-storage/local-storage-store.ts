import {
  byFirstSent,
  entryNamespace,
  entryPrefix,
  type PendingCall,
  type PendingCallStore,
  storedCall,
} from './pending-call-store.js';

/** The part of the Web Storage API the store uses (`localStorage`, `sessionStorage`). */
export interface WebStorageLike {
  readonly length: number;
  key(index: number): string | null;
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface LocalStorageStoreOptions {
  /** @default globalThis.localStorage, looked up on first use (it does not exist during server rendering) */
  storage?: WebStorageLike;
  /** Prefix of every entry's name. @default 'trpc-idempotency' */
  prefix?: string;
}

/**
 * Keeps pending calls in `localStorage`: one entry per call, `<prefix>:<namespace>:<key>`. Writes are
 * synchronous and survive a reload or a killed tab; the origin's other tabs see them at once.
 */
export function localStorageStore(options: LocalStorageStoreOptions = {}): PendingCallStore {
  const prefix = options.prefix ?? 'trpc-idempotency';
  const storage = (): WebStorageLike => {
    const found = options.storage ?? (globalThis as { localStorage?: WebStorageLike }).localStorage;
    if (!found) throw new Error('localStorageStore: no localStorage here; pass `storage`');
    return found;
  };
  const namesOf = (namespace: string): string[] => {
    const s = storage();
    const start = entryPrefix(prefix, namespace);
    const names: string[] = [];
    for (let i = 0; i < s.length; i++) {
      const name = s.key(i);
      if (name?.startsWith(start)) names.push(name);
    }
    return names;
  };
  return {
    async list(namespace) {
      const s = storage();
      const start = entryPrefix(prefix, namespace);
      return namesOf(namespace)
        .map((name) => storedCall(name, start, s.getItem(name)))
        .filter((call): call is PendingCall => call !== undefined)
        .sort(byFirstSent);
    },
    async put(namespace, call) {
      storage().setItem(entryPrefix(prefix, namespace) + call.key, JSON.stringify(call));
    },
    async remove(namespace, key) {
      storage().removeItem(entryPrefix(prefix, namespace) + key);
    },
    async clear(namespace) {
      const s = storage();
      for (const name of namesOf(namespace)) s.removeItem(name);
    },
    async namespacesOf(key) {
      const s = storage();
      const found: string[] = [];
      for (let i = 0; i < s.length; i++) {
        const name = s.key(i) ?? '';
        const namespace = entryNamespace(prefix, name, key);
        if (namespace !== undefined && storedCall(name, entryPrefix(prefix, namespace), s.getItem(name))) {
          found.push(namespace);
        }
      }
      return found;
    },
  };
}
