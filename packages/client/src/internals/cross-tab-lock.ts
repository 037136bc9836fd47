interface LockManagerLike {
  request<T>(name: string, callback: () => Promise<T>): Promise<T>;
}

function lockManager(): LockManagerLike | undefined {
  return (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks;
}

/** Whether tabs coordinate through the Web Locks API here (browsers); elsewhere only this process does. */
export function hasCrossTabLocks(): boolean {
  return typeof lockManager()?.request === 'function';
}

/** In-process queues, for where there are no Web Locks (React Native, Node, old browsers). */
const local = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` holding the exclusive lock `name`: across the origin's tabs with the Web Locks API, else
 * within this JavaScript realm only. A lock is released when `fn` settles, or when its tab goes away.
 */
export function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const locks = lockManager();
  if (locks && typeof locks.request === 'function') return locks.request(name, fn);
  const before = local.get(name) ?? Promise.resolve();
  const run = before.then(fn, fn);
  const tail = run.catch(() => {});
  local.set(name, tail);
  void tail.then(() => {
    if (local.get(name) === tail) local.delete(name);
  });
  return run;
}

/** The lock of one stored key: held by a call while in flight and by `resume` while it re-sends the key. */
export function keyLockName(namespace: string, key: string): string {
  return `trpc-idempotency:${namespace}:${key}`;
}
