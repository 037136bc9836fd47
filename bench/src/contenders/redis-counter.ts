/** Counts the Redis commands a peer sends, to report round trips per request next to ours' SQL count. */
export class RedisCounter {
  commands = 0;

  /** Wraps the three commands Powertools' cache layer uses. */
  wrap<C extends { get: Function; set: Function; del: Function }>(client: C): C {
    return {
      get: (...args: unknown[]) => {
        this.commands++;
        return client.get(...args);
      },
      set: (...args: unknown[]) => {
        this.commands++;
        return client.set(...args);
      },
      del: (...args: unknown[]) => {
        this.commands++;
        return client.del(...args);
      },
    } as unknown as C;
  }

  wrapMethods(target: Record<string, unknown>, names: string[]): void {
    for (const name of names) {
      const original = target[name] as (...args: unknown[]) => unknown;
      target[name] = (...args: unknown[]) => {
        this.commands++;
        return original.apply(target, args);
      };
    }
  }
}
