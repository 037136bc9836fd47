import { describe, expect, it } from 'vitest';
import { committedBefore } from './postgres-snapshot.js';

describe('committedBefore', () => {
  it('sees what committed before the snapshot and not what ran or started after it', () => {
    expect(committedBefore('100:105:101,103', '99')).toBe(true);
    expect(committedBefore('100:105:101,103', '102')).toBe(true);
    expect(committedBefore('100:105:101,103', '101')).toBe(false);
    expect(committedBefore('100:105:101,103', '105')).toBe(false);
    expect(committedBefore('100:105:', '140')).toBe(false);
  });

  it('treats frozen and bootstrap ids as always committed', () => {
    expect(committedBefore('100:105:', '2')).toBe(true);
  });

  it('places 32-bit ids next to a snapshot in a later epoch', () => {
    const epoch = 3n * 2n ** 32n;
    const snapshot = `${epoch + 10n}:${epoch + 20n}:${epoch + 12n}`;
    expect(committedBefore(snapshot, '4294967290')).toBe(true); // the previous epoch's end
    expect(committedBefore(snapshot, '12')).toBe(false);
    expect(committedBefore(snapshot, '15')).toBe(true);
    expect(committedBefore(snapshot, '25')).toBe(false);
  });
});
