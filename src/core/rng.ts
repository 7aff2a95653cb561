// Seeded random numbers (xoshiro128**, seeded through splitmix32) so every run reproduces from
// its seed. `fork(label)` derives independent streams so adding a consumer does not shift others.

/** Deterministic pseudo-random generator. */
export class Rng {
  /**
   * The four 32-bit state words in one typed array: as object fields, values of 2^30 and more would each be
   * a boxed number (the simulator draws from a generator per request for every token it samples).
   */
  private readonly s = new Int32Array(4);

  constructor(readonly seed: number) {
    let x = seed >>> 0;
    const next = (): number => {
      // splitmix32
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    for (let i = 0; i < 4; i++) this.s[i] = next();
  }

  /** Uniform 32-bit unsigned integer. */
  nextU32(): number {
    const s = this.s;
    const s0 = s[0] as number;
    const s1 = s[1] as number;
    // Int32 words: every operation below is on 32-bit patterns, the sign is only how they are stored.
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    const s2 = (s[2] as number) ^ s0;
    const s3 = (s[3] as number) ^ s1;
    s[1] = s1 ^ s2;
    s[0] = s0 ^ s3;
    s[2] = s2 ^ t;
    s[3] = rotl(s3, 11);
    return result;
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    if (!Number.isInteger(lo) || !Number.isInteger(hi) || hi < lo) {
      throw new RangeError(`int(${lo}, ${hi}): need integers with lo <= hi`);
    }
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  /** Standard normal sample (Box–Muller). */
  normal(mean = 0, std = 1): number {
    let u = this.float();
    while (u === 0) u = this.float();
    const v = this.float();
    return mean + std * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** One element chosen uniformly. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("pick from an empty array");
    return items[this.int(0, items.length - 1)] as T;
  }

  /** Index sampled from unnormalised non-negative weights. */
  categorical(weights: ArrayLike<number>): number {
    let total = 0;
    for (let i = 0; i < weights.length; i++) total += weights[i] as number;
    if (!(total > 0)) throw new RangeError("categorical: weights must sum to > 0");
    let r = this.float() * total;
    for (let i = 0; i < weights.length; i++) {
      r -= weights[i] as number;
      if (r < 0) return i;
    }
    return weights.length - 1;
  }

  /** Fisher–Yates shuffle, in place; returns the array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [items[i], items[j]] = [items[j] as T, items[i] as T];
    }
    return items;
  }

  /** An independent generator derived from this seed and a label. */
  fork(label: string): Rng {
    let h = 0x811c9dc5 ^ this.seed;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
    return new Rng(h >>> 0);
  }
}

/** 32-bit rotate left (an int32 pattern). */
function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
