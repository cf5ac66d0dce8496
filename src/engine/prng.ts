/**
 * A small seeded pseudo-random generator (xoshiro128**, seeded through splitmix32) for weight
 * initialisation and sampling. Same seed, same stream, on every platform.
 *
 * @module
 * @internal
 */

/**
 * x^(2^64) modulo the characteristic polynomial of xoshiro128's state transition, low bit
 * first: applying it to a state advances the stream by 2^64 draws (the generator's published
 * jump polynomial; the engine's tests check it against 2^64 steps of the transition).
 */
const JUMP = [0x8764000b, 0xf542d2d3, 0x6fa035c3, 0x77f2db5b];

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

  /** The four 32-bit words of the state. */
  state(): Uint32Array {
    return Uint32Array.of(this.s0, this.s1, this.s2, this.s3);
  }

  /** A generator continuing from `words[at..at+4)` (as returned by {@link Rng.state}). */
  static fromState(words: ArrayLike<number>, at = 0): Rng {
    const rng = new Rng(0);
    rng.s0 = words[at]! | 0;
    rng.s1 = words[at + 1]! | 0;
    rng.s2 = words[at + 2]! | 0;
    rng.s3 = words[at + 3]! | 0;
    return rng;
  }

  /** Advances the stream by 2^64 draws, to the start of the next of its non-overlapping substreams. */
  jump(): void {
    let t0 = 0,
      t1 = 0,
      t2 = 0,
      t3 = 0;
    for (const word of JUMP) {
      for (let b = 0; b < 32; b++) {
        if ((word >>> b) & 1) {
          t0 ^= this.s0;
          t1 ^= this.s1;
          t2 ^= this.s2;
          t3 ^= this.s3;
        }
        this.nextUint32();
      }
    }
    this.s0 = t0;
    this.s1 = t1;
    this.s2 = t2;
    this.s3 = t3;
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
