import { byFirstSent, type PendingCall, type PendingCallStore } from './pending-call-store.js';

export interface IndexedDBStoreOptions {
  /** The database's name. @default 'trpc-idempotency' */
  databaseName?: string;
  /** @default globalThis.indexedDB, looked up on first use (it does not exist during server rendering) */
  indexedDB?: IDBFactory;
}

const STORE = 'pendingCalls';

interface Row extends PendingCall {
  namespace: string;
}

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** Resolves when the transaction has committed, so a resolved `put` is on disk before the call is sent. */
function committed(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
  });
}

/**
 * Keeps pending calls in IndexedDB: one object store keyed by `[namespace, key]`. Use it where
 * `localStorage` is missing or too small (web workers, large inputs).
 */
export function indexedDBStore(options: IndexedDBStoreOptions = {}): PendingCallStore {
  const name = options.databaseName ?? 'trpc-idempotency';
  let opened: Promise<IDBDatabase> | undefined;
  const database = () => {
    opened ??= new Promise<IDBDatabase>((resolve, reject) => {
      const factory = options.indexedDB ?? (globalThis as { indexedDB?: IDBFactory }).indexedDB;
      if (!factory) throw new Error('indexedDBStore: no IndexedDB here; pass `indexedDB`');
      const open = factory.open(name, 1);
      open.onupgradeneeded = () => {
        const store = open.result.createObjectStore(STORE, { keyPath: ['namespace', 'key'] });
        store.createIndex('namespace', 'namespace');
      };
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
      // Another tab holds an older version open: it must close before this one can upgrade.
      open.onblocked = () => reject(new Error(`indexedDBStore: database ${name} is blocked by another tab`));
    }).catch((error: unknown) => {
      opened = undefined; // let the next call try again
      throw error;
    });
    return opened;
  };
  const write = async (run: (store: IDBObjectStore) => void) => {
    const tx = (await database()).transaction(STORE, 'readwrite');
    const done = committed(tx);
    run(tx.objectStore(STORE));
    await done;
  };
  const range = (namespace: string) => IDBKeyRange.only(namespace);
  return {
    async list(namespace) {
      const tx = (await database()).transaction(STORE, 'readonly');
      const rows = (await request(tx.objectStore(STORE).index('namespace').getAll(range(namespace)))) as Row[];
      return rows.map(({ key, path, input, firstSentAt }) => ({ key, path, input, firstSentAt })).sort(byFirstSent);
    },
    async namespacesOf(key) {
      const tx = (await database()).transaction(STORE, 'readonly');
      // Primary keys are [namespace, key] pairs: a handful of pending calls, read without their records.
      const keys = (await request(tx.objectStore(STORE).getAllKeys())) as [string, string][];
      return keys.filter(([, k]) => k === key).map(([namespace]) => namespace);
    },
    put: (namespace, call) => write((store) => store.put({ ...call, namespace } satisfies Row)),
    remove: (namespace, key) => write((store) => store.delete([namespace, key])),
    clear: (namespace) =>
      write((store) => {
        const cursor = store.index('namespace').openKeyCursor(range(namespace));
        cursor.onsuccess = () => {
          const current = cursor.result;
          if (!current) return;
          store.delete(current.primaryKey);
          current.continue();
        };
      }),
  };
}
