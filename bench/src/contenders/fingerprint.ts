import { createHash } from 'node:crypto';

/** The peers' own fingerprint: SHA-256 of path + JSON input (what a hand-written middleware would do). */
export function jsonFingerprint(path: string, input: unknown): string {
  return createHash('sha256').update(path).update('\0').update(JSON.stringify(input)).digest('hex');
}
