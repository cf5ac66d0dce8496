/**
 * A small seeded pseudo-random generator (xoshiro128**, seeded through splitmix32) for weight
 * initialisation and sampling. Same seed, same stream, on every platform.
 *
 * @module
 * @internal
 */

/** Deterministic random stream. */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** @param seed any finite number; its low 32 bits and the integer part above them select the stream. */
  constructor(seed: number) {
    let state = (Math.trunc(seed) ^ Math.trunc(seed / 2 ** 32)) >>> 0;
    const next = (): number => {
      // splitmix32
      state = (state + 0x9e3779b9) >>> 0;
      let z = state;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** The next 32 random bits as an unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** A uniform number in [0, 1) with 32 random bits. */
  next(): number {
    return this.nextUint32() / 2 ** 32;
  }

  /** A standard normal number (Box–Muller). */
  normal(): number {
    const u = 1 - this.next(); // (0, 1]
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
