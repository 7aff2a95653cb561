// The prefix-cache index shared by L1 (KvBlockManager) and the in-process tiers: slots (block numbers, tier
// slots) chained under a small-integer key (hashKey of their hash). A Map keyed by small integers compares
// keys without reading a string, and the chains live in a typed array, so indexing a block allocates nothing:
// a full-scale simulation registers a block every 16 generated tokens and holds millions of them.

/** No slot: the end of a chain, or a key with none. */
export const NO_SLOT = -1;

/**
 * Slots chained per key, in the order they were added. Distinct hashes may share a key, so a caller walks
 * the chain (`first`, then `next`) and compares each slot's hash. A slot is in at most one chain.
 */
export class KeyChains {
  private readonly heads = new Map<number, number>();
  private nextOf: Int32Array;

  /** An index for slots 0 .. capacity − 1 (grow() raises it). */
  constructor(capacity = 0) {
    this.nextOf = new Int32Array(capacity).fill(NO_SLOT);
  }

  /** The first slot under `key`, or NO_SLOT. */
  first(key: number): number {
    return this.heads.get(key) ?? NO_SLOT;
  }

  /** The slot after `slot` in its chain, or NO_SLOT. */
  next(slot: number): number {
    return this.nextOf[slot] as number;
  }

  /** Appends `slot` (not in any chain) at the end of `key`'s chain: searches take the first slot that matches. */
  add(key: number, slot: number): void {
    this.nextOf[slot] = NO_SLOT;
    const first = this.heads.get(key);
    if (first === undefined) {
      this.heads.set(key, slot);
      return;
    }
    let last = first;
    while (this.nextOf[last] !== NO_SLOT) last = this.nextOf[last] as number;
    this.nextOf[last] = slot;
  }

  /** Takes `slot` out of `key`'s chain; a slot not in it is left alone. */
  remove(key: number, slot: number): void {
    const next = this.nextOf[slot] as number;
    const first = this.heads.get(key);
    if (first === slot) {
      if (next === NO_SLOT) this.heads.delete(key);
      else this.heads.set(key, next);
    } else if (first !== undefined) {
      let before = first;
      while (this.nextOf[before] !== slot && this.nextOf[before] !== NO_SLOT) before = this.nextOf[before] as number;
      if (this.nextOf[before] === slot) this.nextOf[before] = next;
    }
    this.nextOf[slot] = NO_SLOT;
  }

  /** How many slots the index can hold. */
  capacity(): number {
    return this.nextOf.length;
  }

  /** Raises the capacity to `capacity` slots (never lowers it), keeping every chain. */
  grow(capacity: number): void {
    if (capacity <= this.nextOf.length) return;
    const nextOf = new Int32Array(capacity).fill(NO_SLOT);
    nextOf.set(this.nextOf);
    this.nextOf = nextOf;
  }

  /** Empties every chain. */
  clear(): void {
    this.heads.clear();
    this.nextOf.fill(NO_SLOT);
  }

  /** The keys that have a chain. */
  keys(): IterableIterator<number> {
    return this.heads.keys();
  }
}
