// The prefix-cache index shared by L1 (KvBlockManager) and the in-process tiers: slots (block numbers, tier
// slots) chained under a small-integer key (hashKey of their hash). Everything lives in typed arrays: an
// open-addressing table (linear probing) from key to the chain's first slot, and the chains' links. A full-
// scale simulation indexes millions of blocks and changes the index at every block it fills, evicts or
// loads: a JS Map of that size costs several cache misses per probe (bucket, then entry), and rehashes into
// a new backing store of a hundred MB or more as deletions accumulate, garbage that forces a full collection.
// This table probes one contiguous run, never reallocates at a steady size, and stays outside the JS heap.

/** No slot: the end of a chain, or a key with none. */
export const NO_SLOT = -1;

/** An empty table cell (keys are >= 0). */
const EMPTY = -1;

/** The smallest table, in cells. */
const MIN_CELLS = 16;

/**
 * Slots chained per key, in the order they were added. Distinct hashes may share a key, so a caller walks
 * the chain (`first`, then `next`) and compares each slot's hash. A slot is in at most one chain.
 */
export class KeyChains {
  /**
   * Cell c is table[2c] (its key; EMPTY: none) and table[2c + 1] (the first slot of the key's chain): a probe
   * reads the key and its chain's head from one cache line.
   */
  private table: Int32Array;
  /** cells − 1 (cells is a power of two). */
  private mask = 0;
  /** 32 − log2(cells): see homeOf. */
  private shift = 0;
  private numKeys = 0;
  private nextOf: Int32Array;

  /** An index for slots 0 .. capacity − 1 (grow() raises it). */
  constructor(capacity = 0) {
    this.nextOf = new Int32Array(capacity).fill(NO_SLOT);
    this.table = this.emptyTable(cellsFor(capacity));
  }

  /** The first slot under `key`, or NO_SLOT. */
  first(key: number): number {
    const c = this.cellOf(key);
    return this.table[2 * c] === EMPTY ? NO_SLOT : (this.table[2 * c + 1] as number);
  }

  /** The slot after `slot` in its chain, or NO_SLOT. */
  next(slot: number): number {
    return this.nextOf[slot] as number;
  }

  /** Appends `slot` (not in any chain) at the end of `key`'s chain: searches take the first slot that matches. */
  add(key: number, slot: number): void {
    // A negative key would read as an empty cell, a fraction or a number past 2^31 − 1 would not fit one.
    if ((key | 0) !== key || key < 0) throw new Error(`key chains: key must be an integer in 0..2^31 − 1, got ${key}`);
    this.nextOf[slot] = NO_SLOT;
    const c = this.cellOf(key);
    if (this.table[2 * c] === EMPTY) {
      this.table[2 * c] = key;
      this.table[2 * c + 1] = slot;
      this.numKeys++;
      return;
    }
    let last = this.table[2 * c + 1] as number;
    while (this.nextOf[last] !== NO_SLOT) last = this.nextOf[last] as number;
    this.nextOf[last] = slot;
  }

  /** Takes `slot` out of `key`'s chain; a slot not in it is left alone. */
  remove(key: number, slot: number): void {
    const c = this.cellOf(key);
    if (this.table[2 * c] === EMPTY) return;
    const next = this.nextOf[slot] as number;
    const first = this.table[2 * c + 1] as number;
    if (first === slot) {
      if (next === NO_SLOT) this.deleteCell(c);
      else this.table[2 * c + 1] = next;
    } else {
      let before = first;
      while (this.nextOf[before] !== slot && this.nextOf[before] !== NO_SLOT) before = this.nextOf[before] as number;
      if (this.nextOf[before] !== slot) return;
      this.nextOf[before] = next;
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
    const cells = cellsFor(capacity);
    if (2 * cells === this.table.length) return;
    const old = this.table;
    this.table = this.emptyTable(cells);
    for (let c = 0; 2 * c < old.length; c++) {
      const key = old[2 * c] as number;
      if (key === EMPTY) continue;
      const to = this.cellOf(key);
      this.table[2 * to] = key;
      this.table[2 * to + 1] = old[2 * c + 1] as number;
    }
  }

  /** Empties every chain. */
  clear(): void {
    this.table.fill(EMPTY);
    this.nextOf.fill(NO_SLOT);
    this.numKeys = 0;
  }

  /** The keys that have a chain. */
  *keys(): IterableIterator<number> {
    for (let i = 0; i < this.table.length; i += 2) if (this.table[i] !== EMPTY) yield this.table[i] as number;
  }

  /** How many keys have a chain. */
  size(): number {
    return this.numKeys;
  }

  /** A table of `cells` empty cells (a power of two), with the mask and shift that address it. */
  private emptyTable(cells: number): Int32Array {
    this.mask = cells - 1;
    this.shift = 32 - Math.log2(cells);
    return new Int32Array(2 * cells).fill(EMPTY);
  }

  /** The cell a probe for `key` starts at (Fibonacci hashing: the top bits of key × 2^32/φ). */
  private homeOf(key: number): number {
    return Math.imul(key, 0x9e3779b1) >>> this.shift;
  }

  /** The cell holding `key`, or the empty cell where it would go. */
  private cellOf(key: number): number {
    let c = this.homeOf(key);
    for (;;) {
      const k = this.table[2 * c];
      if (k === key || k === EMPTY) return c;
      c = (c + 1) & this.mask;
    }
  }

  /**
   * Empties cell `c` by backward-shift deletion: the entries after it in its probe run move back when their
   * home cell allows, so lookups need no tombstones and runs never lengthen with churn.
   */
  private deleteCell(c: number): void {
    const mask = this.mask;
    let hole = c;
    for (let j = (c + 1) & mask; ; j = (j + 1) & mask) {
      const key = this.table[2 * j] as number;
      if (key === EMPTY) break;
      const home = this.homeOf(key);
      // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        this.table[2 * hole] = key;
        this.table[2 * hole + 1] = this.table[2 * j + 1] as number;
        hole = j;
      }
    }
    this.table[2 * hole] = EMPTY;
    this.numKeys--;
  }
}

/** Table cells for `capacity` slots: a power of two with the load at most 2/3 (a slot has at most one key). */
function cellsFor(capacity: number): number {
  let cells = MIN_CELLS;
  while (cells * 2 < capacity * 3) cells *= 2;
  return cells;
}
