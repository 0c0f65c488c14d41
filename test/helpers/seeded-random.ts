/**
 * A small seeded generator (mulberry32) for the randomised suites (test/reliability/): the same seed
 * replays the same choices, so a failure printed with its seed can be run again. Short mode uses a
 * fixed seed; the long mode a fresh one.
 */
export function seededRandom(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of a randomised suite: fixed by default, fresh in `npm run test:long`. */
export const suiteSeed = (): number => (process.env.TWINVOL_LONG === '1' ? Date.now() % 2 ** 31 : 20261125);
