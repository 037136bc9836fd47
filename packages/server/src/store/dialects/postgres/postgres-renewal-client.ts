import type { Row } from '../dialect.js';
import type { PgPoolLike, PgStandaloneClientLike } from './pg-pool-like.js';

/**
 * Lease renewals' own connection on the fast path: a `pg` Client made from the pool's Client class and options,
 * outside the pool. Handlers may hold every pooled connection for as long as they run; a renewal queued behind
 * them would let the very leases they hold lapse. Opened when a lease starts to be held, closed once renewals stop.
 */
export class RenewalClient {
  readonly #make: () => PgStandaloneClientLike;
  #client: Promise<PgStandaloneClientLike> | undefined;

  private constructor(make: () => PgStandaloneClientLike) {
    this.#make = make;
  }

  /** Undefined when the pool does not say how it makes its clients (not `pg`'s Pool). */
  static of(pool: PgPoolLike): RenewalClient | undefined {
    const { Client, options } = pool;
    return typeof Client === 'function' ? new RenewalClient(() => new Client(options)) : undefined;
  }

  /** Opens the connection ahead of the first renewal, so connecting does not eat into a lease. */
  warm(): void {
    if (this.#client) return;
    const opened = this.#open();
    this.#client = opened;
    opened.catch(() => {
      if (this.#client === opened) this.#client = undefined;
    });
  }

  async query(text: string): Promise<Row[]> {
    this.#client ??= this.#open();
    const opened = this.#client;
    try {
      const result = await (await opened).query(text);
      return (Array.isArray(result) ? result[result.length - 1] : result)?.rows ?? [];
    } catch (error) {
      // A failed renewal may mean a dead connection: the next one starts afresh.
      if (this.#client === opened) this.close();
      throw error;
    }
  }

  close(): void {
    const opened = this.#client;
    this.#client = undefined;
    opened?.then((client) => client.end()).catch(() => {});
  }

  async #open(): Promise<PgStandaloneClientLike> {
    const client = this.#make();
    // Without a listener a backend terminated between two renewals would crash the process.
    client.on?.('error', () => {});
    await client.connect();
    return client;
  }
}
