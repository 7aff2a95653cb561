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
    seedWords(this.s, 0, seed);
  }

  /** Uniform 32-bit unsigned integer. */
  nextU32(): number {
    return nextWords(this.s, 0);
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    checkRange(lo, hi);
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
    return new Rng(this.forkSeed(label));
  }

  /** The seed of `fork(label)`'s generator. */
  forkSeed(label: string): number {
    let h = 0x811c9dc5 ^ this.seed;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
    return h >>> 0;
  }
}

/**
 * Many generators' states in one typed array, each addressed by its slot: `add(seed)`'s slot draws exactly
 * the sequence of `new Rng(seed)`. The simulator draws from a generator per request for every token it
 * samples; at full scale thousands of requests run, and a separate Rng per request (its object, its state
 * array) costs cache misses per draw that one shared array does not.
 */
export class RngBank {
  /** Words per slot: the generator's four, then the caller's own (`extraWords`). */
  private readonly stride: number;
  /** Slot i's state is words stride·i .. stride·i + 3, its caller's words the next `extraWords`. */
  private s: Int32Array;
  /** held[i] === 1: slot i is in use (a release of a free slot is a bug). */
  private held = new Uint8Array(16);
  private slots = 0;
  private readonly freeSlots: number[] = [];

  /**
   * `extraWords` int32 words per slot for the caller (`word`, `setWord`), zero at `add`: what a caller reads
   * with every draw lives beside the generator's state, in the cache line the draw loads anyway.
   */
  constructor(extraWords = 0) {
    if (!Number.isInteger(extraWords) || extraWords < 0) throw new RangeError(`rng bank: extraWords must be an integer >= 0, got ${extraWords}`);
    this.stride = 4 + extraWords;
    this.s = new Int32Array(this.stride * this.held.length);
  }

  /** A slot seeded with `seed`; `release` it when done (the bank grows to the most slots held at once). */
  add(seed: number): number {
    let slot = this.freeSlots.pop();
    if (slot === undefined) {
      slot = this.slots++;
      if (this.slots > this.held.length) {
        const s = new Int32Array(2 * this.s.length);
        s.set(this.s);
        this.s = s;
        const held = new Uint8Array(2 * this.held.length);
        held.set(this.held);
        this.held = held;
      }
    }
    this.held[slot] = 1;
    const at = this.stride * slot;
    seedWords(this.s, at, seed);
    this.s.fill(0, at + 4, at + this.stride);
    return slot;
  }

  /** The caller's word `i` (< extraWords) of `slot`. */
  word(slot: number, i: number): number {
    return this.s[this.stride * slot + 4 + i] as number;
  }

  /** Sets the caller's word `i` (< extraWords) of `slot` to `v` (an int32). */
  setWord(slot: number, i: number, v: number): void {
    this.s[this.stride * slot + 4 + i] = v;
  }

  /** Gives a slot back for reuse. */
  release(slot: number): void {
    if (!Number.isInteger(slot) || this.held[slot] !== 1) throw new RangeError(`rng bank: slot ${slot} is not held`);
    this.held[slot] = 0;
    this.freeSlots.push(slot);
  }

  /** Slots held now. */
  size(): number {
    return this.slots - this.freeSlots.length;
  }

  /** Uniform 32-bit unsigned integer from `slot`'s generator. */
  nextU32(slot: number): number {
    return nextWords(this.s, this.stride * slot);
  }

  /** Uniform float in [0, 1) (as Rng.float). */
  float(slot: number): number {
    return this.nextU32(slot) / 4294967296;
  }

  /** Uniform integer in [lo, hi] (inclusive, as Rng.int). */
  int(slot: number, lo: number, hi: number): number {
    checkRange(lo, hi);
    return lo + Math.floor(this.float(slot) * (hi - lo + 1));
  }

  /** One element chosen uniformly (as Rng.pick). */
  pick<T>(slot: number, items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("pick from an empty array");
    return items[this.int(slot, 0, items.length - 1)] as T;
  }
}

function checkRange(lo: number, hi: number): void {
  if (!Number.isInteger(lo) || !Number.isInteger(hi) || hi < lo) {
    throw new RangeError(`int(${lo}, ${hi}): need integers with lo <= hi`);
  }
}

/** Seeds the four state words at s[at..at + 3] from `seed` (splitmix32). */
function seedWords(s: Int32Array, at: number, seed: number): void {
  let x = seed >>> 0;
  for (let i = 0; i < 4; i++) {
    x = (x + 0x9e3779b9) >>> 0;
    let z = x;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    s[at + i] = (z ^ (z >>> 16)) >>> 0;
  }
}

/** One xoshiro128** step of the state words at s[at..at + 3]: the next uniform 32-bit unsigned integer. */
function nextWords(s: Int32Array, at: number): number {
  const s0 = s[at] as number;
  const s1 = s[at + 1] as number;
  // Int32 words: every operation below is on 32-bit patterns, the sign is only how they are stored.
  const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
  const t = s1 << 9;
  const s2 = (s[at + 2] as number) ^ s0;
  const s3 = (s[at + 3] as number) ^ s1;
  s[at + 1] = s1 ^ s2;
  s[at] = s0 ^ s3;
  s[at + 2] = s2 ^ t;
  s[at + 3] = rotl(s3, 11);
  return result;
}

/** 32-bit rotate left (an int32 pattern). */
function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
