/**
 * Seeds derived from the run seed: every random choice of a run (data order, each rollout's
 * sampling seed) is a pure function of the run seed and where it happens, so a resumed run draws
 * exactly what an uninterrupted one would.
 * @module
 */

/**
 * A 32-bit seed from the run seed and the parts that name a random choice (for example the batch,
 * the row and the copy of a rollout). Different parts give independent-looking seeds.
 */
export function deriveSeed(...parts: ReadonlyArray<number | string>): number {
  // FNV-1a over the parts' text joined by U+001F, then a murmur3 finaliser to spread the bits.
  // (Hashed part by part: the joined text is never built, since every rollout derives a few seeds.)
  let h = 0x811c9dc5;
  for (let p = 0; p < parts.length; p++) {
    if (p > 0) h = Math.imul(h ^ 0x1f, 0x01000193);
    const text = String(parts[p]);
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A uniform float stream in [0, 1) from a 32-bit seed (mulberry32): the same seed gives the same
 * numbers on every platform. The pipeline shuffles with it; data generators can use it too.
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

/** `items` in an order drawn from `seed` (Fisher–Yates); the input is not changed. */
export function seededShuffle<T>(items: readonly T[], seed: number): T[] {
  return shuffleInPlace([...items], seed);
}

/**
 * Shuffles `items` in place with the draws of {@link seededShuffle} (a typed array of indices
 * gets the order an array of the same numbers would) and returns it.
 */
export function shuffleInPlace<A extends { length: number; [index: number]: unknown }>(items: A, seed: number): A {
  const next = seededRandom(seed);
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    const swap = items[i];
    items[i] = items[j];
    items[j] = swap;
  }
  return items;
}
