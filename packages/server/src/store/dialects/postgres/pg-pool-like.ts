/** The subset of `pg`'s `Pool` the fast path uses (so the package needs no `pg` dependency). */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
  /** `pg` emits 'connect' with each new client, before handing it to anyone. */
  on?(event: 'connect', listener: (client: PgClientLike) => void): unknown;
  /**
   * `pg`'s Pool keeps the Client class it makes its clients with, and its options (not in its typings): lease
   * renewals open a connection of their own from them, outside the pool the handlers hold.
   */
  Client?: new (
    options: unknown,
  ) => PgStandaloneClientLike;
  options?: unknown;
}

/** A `pg` Client made outside the pool. */
export interface PgStandaloneClientLike extends Pick<PgClientLike, 'query' | 'on'> {
  connect(): Promise<unknown>;
  end(): Promise<void>;
}

/** The subset of `pg`'s `PoolClient` the fast path uses. */
export interface PgClientLike {
  /** Without values `pg` sends a simple query: several statements, an array of results. */
  query(text: string, values?: readonly unknown[]): Promise<PgResultLike | PgResultLike[]>;
  /** Gives the client back; with an error the pool discards it. */
  release(err?: Error | boolean): void;
  /**
   * A checked-out `pg` client has no 'error' listener of the pool's: a connection that dies between two queries
   * would crash the process unless the holder listens.
   */
  on?(event: 'error', listener: (error: Error) => void): unknown;
  removeListener?(event: 'error', listener: (error: Error) => void): unknown;
}

export interface PgResultLike {
  command: string;
  rowCount: number | null;
  rows: Record<string, unknown>[];
}
