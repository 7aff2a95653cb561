// KV tiers below the engine's device memory: L2 (the engine's host memory) and L3 (a global pool
// shared by all engines, Mooncake-style) — the engine's one offload system. The tiers here hold
// block identities, not tensors: the paged block manager offloads evicted and paused blocks to them
// and the cost model charges the traffic by each tier's bandwidth. Engines that hold real KV
// (llama.cpp) save a paused program's sequence state in the state tiers of state-tier.ts, under the
// same L2/L3 names and rules.

import { ArborError } from "../../core/errors.js";
import { makeIdentity, sameIdentity, sameTokens, type KvBlockHash, type KvBlockIdentity } from "./block-hash.js";

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
  /** The stored identity for `hash` (its tokens and parent chain), without touching it. */
  get(hash: KvBlockHash): KvBlockIdentity | undefined;
  /**
   * Stores a block (replacing a colliding entry under the same hash) as most recently used.
   * `parent` is the identity of the previous block of the prefix (null/omitted for a first block).
   * Returns false when the tier is full after its own LRU eviction fails.
   */
  put(hash: KvBlockHash, tokenIds: readonly number[], parent?: KvBlockIdentity | null): boolean;
  touch(hash: KvBlockHash): void;
  remove(hash: KvBlockHash): void;
  size(): number;
  /**
   * Bumped whenever an entry is removed or replaced (LRU eviction, `remove`, a `put` over a held hash
   * with other content); not by a new hash, by `touch`, or by a `put` of the very block held (a use).
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

/** One block of an in-process tier. */
interface TierEntry {
  hash: KvBlockHash;
  id: KvBlockIdentity;
  /** Stamp of the last put or touch. */
  use: number;
  /** False once removed, replaced or evicted. */
  live: boolean;
}

/**
 * An LRU tier in this process. Share one L3 instance between several engines' block managers to
 * model a global pool: a prefix offloaded by one engine is found by the others.
 */
export class InProcessKvTier implements KvTier {
  readonly name: KvTierName;
  readonly capacityBlocks: number;
  readonly bandwidthBytesPerMs: number;
  /** Each entry with the stamp of its last use (put or touch); `live` false once dropped. */
  private readonly entries = new Map<KvBlockHash, TierEntry>();
  /**
   * The uses in order, as (entry, stamp) pairs: a pair is an entry's current use while the stamps match.
   * A touch appends a pair instead of reordering the map (the simulator touches L3 for every block it
   * loads or evicts); the first current pair is the least recently used entry. Stale pairs are skipped
   * and dropped when they outnumber the entries.
   */
  private useEntries: TierEntry[] = [];
  private useStamps: number[] = [];
  private useHead = 0;
  private uses = 0;
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
    return this.entries.has(hash);
  }

  get(hash: KvBlockHash): KvBlockIdentity | undefined {
    return this.entries.get(hash)?.id;
  }

  put(hash: KvBlockHash, tokenIds: readonly number[], parent: KvBlockIdentity | null = null): boolean {
    const held = this.entries.get(hash);
    if (held !== undefined && sameTokens(held.id.tokenIds, tokenIds) && sameIdentity(held.id.parent, parent)) {
      // The very block again (evicted anew after a load): a use, not a replacement, so the lookups that
      // replay this entry as a hit (changeSeq) still stand.
      this.markUse(held);
      return true;
    }
    if (held !== undefined) {
      this.drop(held);
      this.changeSeq++;
    } else if (this.entries.size >= this.capacityBlocks) {
      const lru = this.leastRecent();
      if (lru === undefined) return false;
      this.drop(lru);
      this.evictedCount++;
      this.changeSeq++;
    }
    const e: TierEntry = { hash, id: makeIdentity(hash, tokenIds, parent), use: 0, live: true };
    this.entries.set(hash, e);
    this.markUse(e);
    return true;
  }

  touch(hash: KvBlockHash): void {
    const e = this.entries.get(hash);
    if (e !== undefined) this.markUse(e);
  }

  remove(hash: KvBlockHash): void {
    const e = this.entries.get(hash);
    if (e === undefined) return;
    this.drop(e);
    this.changeSeq++;
  }

  size(): number {
    return this.entries.size;
  }

  /** Entries this tier dropped by its own LRU eviction. */
  evictions(): number {
    return this.evictedCount;
  }

  /** Hashes from least to most recently used (for tests and debugging). */
  lruOrder(): KvBlockHash[] {
    const out: KvBlockHash[] = [];
    for (let i = this.useHead; i < this.useEntries.length; i++) if (this.isCurrent(i)) out.push((this.useEntries[i] as TierEntry).hash);
    return out;
  }

  private drop(e: TierEntry): void {
    e.live = false;
    this.entries.delete(e.hash);
  }

  private markUse(e: TierEntry): void {
    e.use = ++this.uses;
    this.useEntries.push(e);
    this.useStamps.push(e.use);
    if (this.useEntries.length - this.useHead > 2 * this.entries.size + 1024) this.compact();
  }

  private isCurrent(i: number): boolean {
    const e = this.useEntries[i] as TierEntry;
    return e.live && e.use === this.useStamps[i];
  }

  /** The least recently used entry (stale pairs before it are dropped), or undefined when empty. */
  private leastRecent(): TierEntry | undefined {
    while (this.useHead < this.useEntries.length) {
      if (this.isCurrent(this.useHead)) return this.useEntries[this.useHead];
      this.useHead++;
    }
    return undefined;
  }

  /** Keeps only the current pairs, in order (bounded memory: at most 2 × entries + 1024 pairs). */
  private compact(): void {
    const entries: TierEntry[] = [];
    const stamps: number[] = [];
    for (let i = this.useHead; i < this.useEntries.length; i++) {
      if (!this.isCurrent(i)) continue;
      entries.push(this.useEntries[i] as TierEntry);
      stamps.push(this.useStamps[i] as number);
    }
    this.useEntries = entries;
    this.useStamps = stamps;
    this.useHead = 0;
  }
}

/** Milliseconds to move `bytes` between L1 and `tier` at the tier's bandwidth. */
export function transferMs(tier: Pick<KvTier, "bandwidthBytesPerMs">, bytes: number): number {
  if (!(bytes >= 0) || !Number.isFinite(bytes)) throw new Error(`transferMs: bytes must be a finite number >= 0, got ${bytes}`);
  return bytes / tier.bandwidthBytesPerMs;
}
