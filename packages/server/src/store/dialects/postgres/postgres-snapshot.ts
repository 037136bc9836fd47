const XID_SPACE = 2n ** 32n;
const HALF_XID_SPACE = 2n ** 31n;

/**
 * Whether the row version written by transaction `xmin` (the 32-bit id Postgres shows in the `xmin` column) was
 * already committed for `snapshot` (`pg_current_snapshot()` as text: `xmin:xmax:xip,…`, 64-bit ids). A claim that
 * found a row its snapshot could not see waited for that row's transaction (or raced it by microseconds).
 */
export function committedBefore(snapshot: string, xmin: string): boolean {
  const [low, high, inProgress = ''] = snapshot.split(':');
  if (low === undefined || high === undefined) return true;
  const xid = BigInt(xmin);
  // Bootstrap and frozen ids are older than every snapshot.
  if (xid < 3n) return true;
  const oldestRunning = BigInt(low);
  const next = BigInt(high);
  // 32-bit ids wrap around: place `xid` in the 64-bit space next to the snapshot.
  const ahead = (((xid - (next % XID_SPACE)) % XID_SPACE) + XID_SPACE) % XID_SPACE;
  if (ahead < HALF_XID_SPACE) return false;
  const full = next - (XID_SPACE - ahead);
  if (full < oldestRunning) return true;
  return !inProgress.split(',').includes(String(full));
}
