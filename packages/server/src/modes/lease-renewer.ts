import type { RowKey } from '../store/statements.js';

/** A claim this instance holds: the row it owns and the token that proves it. */
export interface LeaseOwner extends RowKey {
  token: string;
}

/** Sends one renewal statement and returns the tokens it renewed. */
export type RenewLeases = (owners: readonly LeaseOwner[]) => Promise<string[]>;

/**
 * The part of the lease a holder trusts: a renewal (or the claim) sent at `t` extends the lease in the database to
 * at least `t + lease`, by the database's clock, which runs at the same rate. The holder gives up a quarter of the
 * lease earlier, so it learns it may lose the key before anyone can take it over.
 */
const TRUSTED_FRACTION = 0.75;

/** One live claim of this instance, as its handler sees it. */
export class HeldLease {
  readonly owner: LeaseOwner;
  readonly #controller = new AbortController();
  readonly #trustMs: number;
  #trustedUntil: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #released = false;

  constructor(owner: LeaseOwner, leaseMs: number, sentAt: number) {
    this.owner = owner;
    this.#trustMs = leaseMs * TRUSTED_FRACTION;
    this.#trustedUntil = sentAt + this.#trustMs;
    this.#arm();
  }

  /** Aborted once this holder can no longer be sure it owns the key: it must stop, and it will not store. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get lost(): boolean {
    return this.#controller.signal.aborted;
  }

  /** A renewal sent at `sentAt` went through. */
  confirm(sentAt: number): void {
    if (!this.lost) this.#trustedUntil = Math.max(this.#trustedUntil, sentAt + this.#trustMs);
  }

  /** The claim is gone (taken over, or its lease lapsed in the database) or can no longer be trusted. */
  lose(why: string): void {
    if (this.lost || this.#released) return;
    clearTimeout(this.#timer);
    this.#controller.abort(
      new DOMException(
        `idempotency: this call lost its lease on key "${this.owner.key}" (${why}); its outcome will not be stored`,
        'AbortError',
      ),
    );
  }

  release(): void {
    this.#released = true;
    clearTimeout(this.#timer);
  }

  /** Wakes at the end of the trusted part of the lease; without a renewal by then the holder fences itself. */
  #arm(): void {
    const left = this.#trustedUntil - performance.now();
    if (left > 0) {
      this.#timer = setTimeout(() => {
        // Timers run before I/O in Node's loop: a renewal's answer that already arrived is read first.
        setImmediate(() => this.#arm());
      }, left);
      this.#timer.unref?.();
      return;
    }
    this.lose('it could not be renewed in time');
  }
}

/**
 * Renews every live lease of one middleware instance in one statement per tick (a third of the lease), on a
 * connection that never waits behind the handlers it protects where the store can give one (see Store.renew).
 * A renewal that fails or comes late is not retried in a hurry: each holder's own deadline fences it off first.
 */
export class LeaseRenewer {
  readonly #leases = new Set<HeldLease>();
  readonly #leaseMs: number;
  readonly #renew: RenewLeases;
  readonly #idle: () => void;
  readonly #warm: () => void;
  #timer: ReturnType<typeof setInterval> | undefined;
  #lingering: ReturnType<typeof setTimeout> | undefined;
  #renewing = false;

  /**
   * `warm` runs when leases start to be held again (the store opens the renewal connection, so connecting does not
   * eat into the first lease); `idle` once no lease has needed a renewal for a lease length (the store closes it;
   * lingering that long spares a reconnection per burst of calls).
   */
  constructor(leaseMs: number, renew: RenewLeases, hooks: { warm: () => void; idle: () => void }) {
    this.#leaseMs = leaseMs;
    this.#renew = renew;
    this.#warm = hooks.warm;
    this.#idle = hooks.idle;
  }

  /** Starts renewing a claim whose statement was sent at `sentAt` (performance.now()). */
  hold(owner: LeaseOwner, sentAt: number): HeldLease {
    const lease = new HeldLease(owner, this.#leaseMs, sentAt);
    this.#leases.add(lease);
    if (!this.#timer) {
      // Four renewals per lease: one that fails or comes late still leaves time for the next before the deadline.
      this.#timer = setInterval(() => void this.#tick(), Math.max(20, Math.floor(this.#leaseMs / 4)));
      this.#timer.unref?.();
      this.#warm();
      this.#linger();
    }
    return lease;
  }

  /** Stops renewing `lease` (its call is over). */
  drop(lease: HeldLease): void {
    lease.release();
    this.#leases.delete(lease);
    if (this.#leases.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  async #tick(): Promise<void> {
    // One renewal at a time: a slow one must not pile up others on its connection.
    if (this.#renewing) return;
    const batch = [...this.#leases].filter((l) => !l.lost);
    if (batch.length === 0) return;
    clearTimeout(this.#lingering);
    this.#renewing = true;
    const sentAt = performance.now();
    try {
      const renewed = new Set(await this.#renew(batch.map((l) => l.owner)));
      for (const lease of batch) {
        if (!this.#leases.has(lease)) continue;
        if (renewed.has(lease.owner.token)) lease.confirm(sentAt);
        else lease.lose('another call took the key over, or its lease lapsed');
      }
    } catch {
      // Unreachable database, broken connection: each holder's deadline decides, well before its lease lapses.
    } finally {
      this.#renewing = false;
      this.#linger();
    }
  }

  /** Lets the renewal connection go a lease length from now, unless a renewal needs it before. */
  #linger(): void {
    clearTimeout(this.#lingering);
    this.#lingering = setTimeout(this.#idle, this.#leaseMs);
    this.#lingering.unref?.();
  }
}
