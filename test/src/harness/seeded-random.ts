/**
 * A small deterministic PRNG (mulberry32): the same seed gives the same fault schedule on every run,
 * so a failing chaos run can be replayed by its printed seed.
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed a test uses: `CHAOS_SEED` when set (to replay a run), else the given default. */
export function chaosSeed(fallback: number): number {
  const fromEnv = Number(process.env.CHAOS_SEED);
  return Number.isFinite(fromEnv) && process.env.CHAOS_SEED ? fromEnv : fallback;
}
