import type { RowKey } from '../store/dialects/dialect.js';

/** A claim this instance holds: the row it owns and the token that proves it. */
export interface LeaseOwner extends RowKey {
  token: string;
}

/** Sends one renewal statement and returns the tokens it renewed. */
export type RenewLeases = (owners: readonly (LeaseOwner & { locked: boolean })[]) => Promise<string[]>;

/** One live claim of this instance, as its handler sees it. */
export class HeldLease {
  readonly owner: LeaseOwner;
  readonly #controller = new AbortController();
  #released = false;
  /** Its handler's transaction holds the key's advisory lock: renewals then go on only while that lock is held. */
  locked = false;

  constructor(owner: LeaseOwner) {
    this.owner = owner;
  }

  /**
   * Aborted once this holder learns another call took the key over (its connection, and so its advisory lock, was
   * lost): it must stop, and it will not store. Missed renewals alone never abort it: its lock keeps the key.
   */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get lost(): boolean {
    return this.#controller.signal.aborted;
  }

  /** The claim is gone: another call took it over. */
  lose(why: string): void {
    if (this.lost || this.#released) return;
    this.#controller.abort(
      new DOMException(
        `idempotency: this call lost its lease on key "${this.owner.key}" (${why}); its outcome will not be stored`,
        'AbortError',
      ),
    );
  }

  release(): void {
    this.#released = true;
  }
}

/**
 * Renews every live lease of one middleware instance in one statement per tick (a third of the lease), on a connection
 * that never waits behind the handlers it protects where the store can give one (see Store.renew in
 * store/dialects/dialect.ts). Renewals keep `locked_until` current (a duplicate then waits without trying a takeover)
 * and tell a holder that was taken over; one that fails or comes late costs nothing: the holder's advisory lock, not
 * its lease, keeps the key.
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

  /** Starts renewing a claim. */
  hold(owner: LeaseOwner): HeldLease {
    const lease = new HeldLease(owner);
    this.#leases.add(lease);
    if (!this.#timer) {
      // Four renewals per lease: one that fails or comes late still leaves time for the next before it lapses.
      this.#timer = setInterval(() => void this.#tick(), Math.max(20, Math.floor(this.#leaseMs / 4)));
      this.#timer.unref?.();
      this.#warm();
      this.#linger();
    }
    return lease;
  }

  /**
   * Stops renewing `lease` once its handler is done; a renewal already in flight is then ignored for it. It can still
   * be told it lost the key (its completion found it fenced off).
   */
  settle(lease: HeldLease): void {
    this.#leases.delete(lease);
    if (this.#leases.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Stops renewing `lease` (its call is over). */
  drop(lease: HeldLease): void {
    lease.release();
    this.settle(lease);
  }

  async #tick(): Promise<void> {
    // One renewal at a time: a slow one must not pile up others on its connection.
    if (this.#renewing) return;
    const batch = [...this.#leases].filter((l) => !l.lost);
    if (batch.length === 0) return;
    clearTimeout(this.#lingering);
    this.#renewing = true;
    try {
      const renewed = new Set(await this.#renew(batch.map((l) => ({ ...l.owner, locked: l.locked }))));
      for (const lease of batch) {
        if (!this.#leases.has(lease)) continue;
        if (!renewed.has(lease.owner.token)) lease.lose('another call took the key over, or its lease lapsed');
      }
    } catch {
      // Unreachable database, broken connection: the holders' locks keep their keys; the next tick tries again.
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
