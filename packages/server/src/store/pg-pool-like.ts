/** The subset of `pg`'s `Pool` the fast path uses (so the package needs no `pg` dependency). */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
}

/** The subset of `pg`'s `PoolClient` the fast path uses. */
export interface PgClientLike {
  /** Without values `pg` sends a simple query: several statements, an array of results. */
  query(text: string, values?: readonly unknown[]): Promise<PgResultLike | PgResultLike[]>;
  /** Gives the client back; with an error the pool discards it. */
  release(err?: Error | boolean): void;
}

export interface PgResultLike {
  command: string;
  rowCount: number | null;
  rows: Record<string, unknown>[];
}
