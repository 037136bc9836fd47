/**
 * Shifts this process's wall clock (`Date.now()`, `new Date()`) by `offsetMs`, leaving the monotonic clock
 * (`performance.now()`, timers) alone: an app server whose clock disagrees with the database's. Anything that
 * judges the database's timestamps by `Date` is then off by exactly the skew.
 */
export function skewClock(offsetMs: number): void {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  class SkewedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(realNow() + offsetMs);
      else super(...(args as [string | number | Date]));
    }

    static override now(): number {
      return realNow() + offsetMs;
    }
  }
  globalThis.Date = SkewedDate as DateConstructor;
}
