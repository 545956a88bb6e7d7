/**
 * mulberry32: a small, fast seeded pseudo-random generator, good enough for tests that draw moments,
 * fault plans or latencies from a printed seed, so that a run's draws can be replayed. Returns a function
 * that yields the next number in [0, 1) each call; the same seed yields the same sequence.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
