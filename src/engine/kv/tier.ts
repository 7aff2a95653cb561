// KV tiers below the engine's device memory: L2 (the engine's host memory) and L3 (a global pool
// shared by all engines, Mooncake-style) — the engine's one offload system. The tiers here hold
// block identities, not tensors: the paged block manager offloads evicted and paused blocks to them
// and the cost model charges the traffic by each tier's bandwidth. Engines that hold real KV
// (llama.cpp) save a paused program's sequence state in the state tiers of state-tier.ts, under the
// same L2/L3 names and rules.

import { ArborError } from "../../core/errors.js";
import { hashKey, sameIdentity, TIER_SLOT, type KvBlockHash, type KvBlockIdentity } from "./block-hash.js";
import { KeyChains, NO_SLOT } from "./key-chains.js";

/** The tiers below L1: an engine's host memory, and the pool shared by engines. */
export type KvTierName = "L2" | "L3";

/** Refuse a tier name other than L2/L3 (a "config" ArborError naming the value). */
export function checkTierName(name: unknown): asserts name is KvTierName {
  if (name !== "L2" && name !== "L3") throw new ArborError(`kv tier: name must be "L2" or "L3", got ${JSON.stringify(name)}`, "config");
}

/** A KV tier, addressed by chained block hash. */
export interface KvTier {
  readonly name: KvTierName;
  readonly capacityBlocks: number;
  readonly bandwidthBytesPerMs: number;
  has(hash: KvBlockHash): boolean;
  /**
   * The stored identity for `hash` (its tokens and parent chain), without touching it. `key`: hashKey(hash),
   * when the caller has it (an identity's, a hash chain's), so the string is not hashed again. `likely`: an
   * identity the caller expects to find under `hash`; the tier may check it first from what it noted on it
   * (the answer is the same, found sooner when right).
   */
  get(hash: KvBlockHash, key?: number, likely?: KvBlockIdentity): KvBlockIdentity | undefined;
  /**
   * Stores a block under its hash (replacing a colliding entry) as most recently used: the identity
   * itself, shared with its L1 block (identities are immutable). Returns false when the tier is full
   * after its own LRU eviction fails.
   */
  put(block: KvBlockIdentity): boolean;
  /**
   * Whether the tier holds `block` (an entry under its hash with the same identity, `sameIdentity`), marking
   * a held one most recently used: what an engine asks of every block it evicts or offloads.
   */
  use(block: KvBlockIdentity): boolean;
  remove(hash: KvBlockHash): void;
  size(): number;
  /**
   * Bumped whenever an entry is removed or replaced (LRU eviction, `remove`, a `put` over a held hash
   * with other content); not by a new hash, by `use`, or by a `put` of the very block held (a use).
   * A block manager replays a lookup's tier hits while it stays the same.
   * Absent: the tier does not tell, and every lookup searches it again.
   */
  readonly changeSeq?: number;
}

/** Options of an in-process tier. */
export interface InProcessKvTierOptions {
  name: KvTierName;
  capacityBlocks: number;
  /** Transfer bandwidth between this tier and L1, bytes per ms (e.g. 25 GB/s = 25e6). */
  bandwidthBytesPerMs: number;
}

/** No slot: the end of the use list, or no entry (the index's own "none", so a chain's end reads as not held). */
const NONE = NO_SLOT;

/**
 * An LRU tier in this process. Share one L3 instance between several engines' block managers to
 * model a global pool: a prefix offloaded by one engine is found by the others.
 */
export class InProcessKvTier implements KvTier {
  readonly name: KvTierName;
  readonly capacityBlocks: number;
  readonly bandwidthBytesPerMs: number;
  /** hashKey(hash) → the slots of the blocks under that key (distinct hashes may share one; a lookup compares hashes). */
  private readonly entries = new KeyChains();
  private count = 0;
  /**
   * The use order, kept lazily. Until the tier first has to drop an entry for room, each entry only carries the
   * sequence number of its last use (`usedAt`): a use is one store, where moving it in a linked list is four or
   * five loads and stores at random slots of arrays of millions (the simulator touches L3 for every block it
   * loads or evicts, and at Seer's scale the pool never fills: 5M uses at scale 0.25, no eviction). At the first
   * eviction the live entries are sorted by it once into the use list below, the same order, kept from then on.
   */
  private usedAt = new Float64Array(0);
  private useSeq = 0;
  /** True once the use list (prev/next) is built: from the first eviction on. */
  private listed = false;
  /**
   * The use list, least recently used first: a doubly linked list over slot numbers in typed arrays, so
   * a use moves an entry to the tail without allocating. Slots of dropped entries are reused; the arrays
   * grow by doubling up to the capacity. A slot's block is in `slotBlock` (no entry object per block: the
   * pool holds millions).
   */
  private prev = new Int32Array(0);
  private next = new Int32Array(0);
  private readonly slotBlock: (KvBlockIdentity | undefined)[] = [];
  private readonly freeSlots: number[] = [];
  private head = NONE;
  private tail = NONE;
  /**
   * The last hash looked up and its slot (NONE: not held): a block manager asks the same hash again at
   * once (whether the tier holds an evicted block, then its use or put), and the map is millions of
   * entries large in a full-scale simulation.
   */
  private lastHash: KvBlockHash | undefined;
  private lastSlot = NONE;
  private evictedCount = 0;
  changeSeq = 0;

  constructor(opts: InProcessKvTierOptions) {
    checkTierName(opts.name);
    if (!Number.isInteger(opts.capacityBlocks) || opts.capacityBlocks < 0) {
      throw new ArborError(`kv tier ${opts.name}: capacityBlocks must be an integer >= 0, got ${opts.capacityBlocks}`, "config");
    }
    if (!(opts.bandwidthBytesPerMs > 0) || !Number.isFinite(opts.bandwidthBytesPerMs)) {
      throw new ArborError(
        `kv tier ${opts.name}: bandwidthBytesPerMs must be a finite number > 0, got ${opts.bandwidthBytesPerMs}`,
        "config",
      );
    }
    this.name = opts.name;
    this.capacityBlocks = opts.capacityBlocks;
    this.bandwidthBytesPerMs = opts.bandwidthBytesPerMs;
  }

  has(hash: KvBlockHash): boolean {
    return this.find(hash) !== NONE;
  }

  get(hash: KvBlockHash, key?: number, likely?: KvBlockIdentity): KvBlockIdentity | undefined {
    // The tier holds one entry per hash: when the slot noted on `likely` holds it under this hash, a search of
    // the index (cache misses in arrays of millions at scale) would find the same.
    if (likely !== undefined && likely.hash === hash && this.heldAt(likely) !== NONE) return likely;
    const s = this.find(hash, key);
    return s === NONE ? undefined : this.slotBlock[s];
  }

  put(block: KvBlockIdentity): boolean {
    const held = this.find(block.hash, block.key);
    const id = held === NONE ? undefined : (this.slotBlock[held] as KvBlockIdentity);
    if (id !== undefined && sameIdentity(id, block)) {
      // The very block again (evicted anew after a load): a use, not a replacement, so the lookups that
      // replay this entry as a hit (changeSeq) still stand.
      this.markUse(held);
      return true;
    }
    if (held !== NONE) {
      this.drop(held);
      this.changeSeq++;
    } else if (this.count >= this.capacityBlocks) {
      if (!this.listed) this.buildList();
      if (this.head === NONE) return false;
      this.drop(this.head);
      this.evictedCount++;
      this.changeSeq++;
    }
    const s = this.takeSlot();
    this.slotBlock[s] = block;
    block[TIER_SLOT] = s;
    this.entries.add(block.key, s);
    this.count++;
    this.link(s);
    this.lastHash = block.hash;
    this.lastSlot = s;
    return true;
  }

  use(block: KvBlockIdentity): boolean {
    let s = this.heldAt(block);
    if (s === NONE) {
      s = this.find(block.hash, block.key);
      if (s === NONE || !sameIdentity(this.slotBlock[s] as KvBlockIdentity, block)) return false;
    }
    this.markUse(s);
    return true;
  }

  remove(hash: KvBlockHash): void {
    const s = this.find(hash);
    if (s === NONE) return;
    this.drop(s);
    this.changeSeq++;
  }

  size(): number {
    return this.count;
  }

  /** Entries this tier dropped by its own LRU eviction. */
  evictions(): number {
    return this.evictedCount;
  }

  /** Hashes from least to most recently used (for tests and debugging). */
  lruOrder(): KvBlockHash[] {
    let slots: number[] = [];
    if (!this.listed) slots = this.slotsByUse();
    else for (let s = this.head; s !== NONE; s = this.next[s] as number) slots.push(s);
    return slots.map((s) => (this.slotBlock[s] as KvBlockIdentity).hash);
  }

  /** The live slots, least recently used first, by their last use. */
  private slotsByUse(): number[] {
    const slots: number[] = [];
    for (let s = 0; s < this.slotBlock.length; s++) if (this.slotBlock[s] !== undefined) slots.push(s);
    return slots.sort((a, b) => (this.usedAt[a] as number) - (this.usedAt[b] as number));
  }

  /** Builds the use list from the last uses (at the first eviction); every use after it moves the list. */
  private buildList(): void {
    this.prev = new Int32Array(this.usedAt.length);
    this.next = new Int32Array(this.usedAt.length);
    this.listed = true;
    for (const s of this.slotsByUse()) this.link(s);
    this.usedAt = new Float64Array(0);
  }

  /**
   * The slot this tier stored the very identity in, when it still holds it there, else NONE: one load, no search.
   * (The slot noted on an identity is a hint: another tier may have stored it since, and a slot is reused after
   * a drop.)
   */
  private heldAt(block: KvBlockIdentity): number {
    const s = block[TIER_SLOT] ?? NONE;
    return s !== NONE && this.slotBlock[s] === block ? s : NONE;
  }

  /** The slot of the block held under `hash` (its key `key`, when known; NONE: none), through the one-entry cache. */
  private find(hash: KvBlockHash, key?: number): number {
    if (hash === this.lastHash) return this.lastSlot;
    let s = this.entries.first(key ?? hashKey(hash));
    while (s !== NONE && (this.slotBlock[s] as KvBlockIdentity).hash !== hash) s = this.entries.next(s);
    this.lastHash = hash;
    this.lastSlot = s;
    return s;
  }

  private drop(s: number): void {
    if (s === this.lastSlot) this.lastSlot = NONE;
    if (this.listed) this.unlink(s);
    this.entries.remove((this.slotBlock[s] as KvBlockIdentity).key, s);
    this.count--;
    this.slotBlock[s] = undefined;
    this.freeSlots.push(s);
  }

  /** Moves slot `s` to the most recently used end. */
  private markUse(s: number): void {
    if (!this.listed) {
      this.usedAt[s] = ++this.useSeq;
      return;
    }
    if (s === this.tail) return;
    this.unlink(s);
    this.link(s);
  }

  /** A slot for a new entry: a dropped entry's, or a new one (the arrays double when full). */
  private takeSlot(): number {
    const free = this.freeSlots.pop();
    if (free !== undefined) return free;
    const s = this.slotBlock.length;
    if (s === this.entries.capacity()) {
      const grown = Math.min(Math.max(1024, 2 * s), Math.max(this.capacityBlocks, s + 1));
      if (this.listed) {
        this.prev = grownTo(this.prev, grown);
        this.next = grownTo(this.next, grown);
      } else {
        const usedAt = new Float64Array(grown);
        usedAt.set(this.usedAt);
        this.usedAt = usedAt;
      }
      this.entries.grow(grown);
    }
    this.slotBlock.push(undefined);
    return s;
  }

  /** Appends slot `s` at the tail (before the list is built: stamps its use). */
  private link(s: number): void {
    if (!this.listed) {
      this.usedAt[s] = ++this.useSeq;
      return;
    }
    this.prev[s] = this.tail;
    this.next[s] = NONE;
    if (this.tail === NONE) this.head = s;
    else this.next[this.tail] = s;
    this.tail = s;
  }

  private unlink(s: number): void {
    const p = this.prev[s] as number;
    const n = this.next[s] as number;
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
  }
}

/** A copy of `a` with room for `n` entries. */
function grownTo(a: Int32Array, n: number): Int32Array<ArrayBuffer> {
  const out = new Int32Array(n);
  out.set(a);
  return out;
}

/** Milliseconds to move `bytes` between L1 and `tier` at the tier's bandwidth. */
export function transferMs(tier: Pick<KvTier, "bandwidthBytesPerMs">, bytes: number): number {
  if (!(bytes >= 0) || !Number.isFinite(bytes)) throw new Error(`transferMs: bytes must be a finite number >= 0, got ${bytes}`);
  return bytes / tier.bandwidthBytesPerMs;
}
