// The KV block manager of the built-in engine (vLLM v1's KVCacheManager + BlockPool): fixed-size
// blocks with reference counts, a prefix cache keyed by chained block hashes, LRU eviction of cached
// free blocks, and offload to / load from the L2 and L3 tiers. Synchronous and I/O-free.

import { ArborError } from "../../core/errors.js";
import type { KvTransfer } from "../scheduler/step-plan.js";
import {
  BlockHashChain,
  PrefixVerifier,
  hashBlockTokens,
  hashKey,
  makeIdentityAt,
  makeRootIdentity,
  TIER_HIT,
  samePackedAt,
  type KvBlockHash,
  type KvBlockIdentity,
  type KvHashFn,
} from "./block-hash.js";
import { FreeBlockQueue } from "./free-block-queue.js";
import { KeyChains, NO_SLOT } from "./key-chains.js";
import type { KvTier } from "./tier.js";

/** Options of a block manager. */
export interface KvBlockManagerOptions {
  /** Tokens per block (vLLM's block_size). */
  blockSize: number;
  /** Blocks of L1 (device) KV memory (vLLM's num_gpu_blocks). */
  numBlocks: number;
  enablePrefixCaching: boolean;
  /** KV bytes per token, for transfer accounting; default 0. */
  bytesPerToken?: number;
  /** The engine's host-memory tier: evicted cached blocks are offloaded here. */
  l2?: KvTier;
  /** The global pool, usually one instance shared by several managers. */
  l3?: KvTier;
  /** Block hash function; default `hashBlockTokens`. Tests inject weak ones to force collisions. */
  hashFn?: KvHashFn;
  /**
   * Salt mixed into the root of every prefix (vLLM's cache_salt), e.g. the policy version, so that
   * engines on different weights never share KV through L3. See also `setCacheSalt`.
   */
  cacheSalt?: string;
}

/** Result of a prefix-cache lookup. */
export interface ComputedBlocks {
  /**
   * L1 blocks holding the request's first `numCachedTokens` tokens, in order. Read only: a repeated lookup
   * returns the same array, and allocateSlots knows it as verified.
   */
  readonly blockIds: readonly number[];
  numCachedTokens: number;
  /** Blocks among `blockIds` that this lookup loaded from L2/L3 (one KvTransfer each, to L1). */
  readonly fromTier: readonly { tier: "L2" | "L3"; blocks: number }[];
  /** The blocks among `blockIds` that this lookup filled from L2/L3 (what an executor must load). */
  readonly loadedBlockIds: readonly number[];
}

/** Counters since construction. */
export interface KvBlockManagerStats {
  /** Prompt tokens looked up (vllm:prefix_cache_queries_total). */
  queries: number;
  /** Tokens found cached (vllm:prefix_cache_hits_total). */
  hits: number;
  /** Cached blocks evicted from L1. */
  evictions: number;
  offloadedBlocks: number;
  loadedBlocks: number;
}

/** One block's state, for tests and debugging. */
export interface KvBlockInfo {
  refCount: number;
  free: boolean;
  hash: KvBlockHash | null;
  tokenIds: ArrayLike<number> | null;
}

/**
 * A request's KV record as its caller holds it (handleOf), to pass back to allocateSlots and touchRecords: at
 * scale a lookup by id is a cold string and a probe of the map at every decode step of every request, where the
 * caller already holds its own record of the request. Valid until the request's KV is freed; a stale one, or
 * another request's or another manager's, is ignored (looked up by id instead).
 */
export interface KvRequestHandle {
  readonly requestId: string;
}

interface RequestKv extends KvRequestHandle {
  /** The manager whose record it is, and false once freed: a handle to it then no longer names the request's KV. */
  readonly owner: KvBlockManager;
  live: boolean;
  blocks: number[];
  /** Tokens the request holds KV slots for. */
  numTokens: number;
  /** Leading blocks whose identity is registered (the chain continues from the last one). */
  numHashed: number;
  /** Root of the request's prefix chain (salt), fixed at admission. */
  root: KvBlockIdentity | null;
  /**
   * The identity of block numHashed − 1 (`root` before the first), which the next block chains from: kept
   * here because at scale the block list and the manager's identity array are cold when a block fills. A
   * held block's identity never changes (only free blocks are evicted; resetPrefixCache stops registering).
   */
  tail: KvBlockIdentity | null;
  /** False after resetPrefixCache: the request's KV predates the reset and is never registered. */
  cacheable: boolean;
}

type Hit =
  | { kind: "L1"; block: number; id: KvBlockIdentity }
  | { kind: "L2" | "L3"; tier: KvTier; id: KvBlockIdentity };

/** Found.blocks' entry for a hit in L2, and in L3. */
const TIER_L2 = -1;
const TIER_L3 = -2;

/** A prefix lookup's hits, one per block from the first. */
interface Found {
  hits: Hit[];
  /**
   * blocks[i]: hits[i]'s L1 block, or {@link TIER_L2} / {@link TIER_L3} (negative) for a tier hit. The lookup's
   * passes over its hits (hundreds for a waiting request, at every step) read this dense array instead of
   * following each hit object.
   */
  blocks: number[];
  /** stamps[i]: the registration stamp of hits[i]'s block (L1 hits), 0 for tier hits. */
  stamps: number[];
}

/**
 * A request's last prefix lookup in this manager: its hits and, per L1 hit, the block's registration
 * stamp then. A waiting request is looked up at every step; while a hit block keeps its stamp (never
 * unregistered or registered again since) the hit is still the first block of its bucket that holds the
 * request's prefix, so the next lookup replays it instead of searching the bucket again.
 */
interface LookupMemo extends Found {
  epoch: number;
  root: KvBlockIdentity | null;
  /**
   * While the manager watches this request's hashes (watchEpoch) and none was registered in L1 since
   * (hashSeq) and no tier entry was removed or replaced (l2Seq, l3Seq), every tier hit still stands.
   */
  watchEpoch: number;
  hashSeq: number;
  l2Seq: number | undefined;
  l3Seq: number | undefined;
  /** The manager's stampSeq when the lookup ended: the blocks (un)registered since are in the change log after it. */
  stampSeq: number;
  /**
   * Its free L1 hits (blocks with refCount 0), counted once and then kept while it is the watched memo (its
   * L1 hits marked): a change of a marked block's refCount to or from 0, and a replay's change of a hit,
   * update them, so a waiting request's lookup reads no refCount of its unchanged prefix (hundreds of
   * blocks, each a cache miss at scale). `counted` false: counted in full at the next lookup.
   */
  counted: boolean;
  freeHits: number;
  /** Free L1 hits at positions below `countedTier` (the first tier hit's, or the hits' end, when counted). */
  freeBefore: number;
  countedTier: number;
}

/** The last lookup's answer and what it was counted under (stampSeq, touchSeq: nothing (un)registered or referenced since). */
interface LastLookup {
  blockIds: readonly number[];
  chain: BlockHashChain | undefined;
  numTokens: number;
  epoch: number;
  root: KvBlockIdentity | null;
  stampSeq: number;
  touchSeq: number;
  /** Free blocks among blockIds. */
  numFree: number;
}

/**
 * The last prefix lookup, when it loaded nothing from L2/L3: what it returned and what it depends on. A
 * request refused for want of KV is looked up again at every step, usually with nothing changed; while
 * none of its dependencies changed (lookupSeq, bumped by any change to a watched block or hash; the
 * tiers' changeSeq; the free blocks its tier hits would be loaded into) the lookup is answered from here.
 */
interface RepeatableLookup {
  chain: BlockHashChain;
  numTokens: number;
  epoch: number;
  root: KvBlockIdentity | null;
  seq: number;
  blockIds: number[];
  numCachedTokens: number;
  /** Whether hits beyond blockIds sit in a tier (not loaded: no spare block then). */
  tierHits: boolean;
  /** Free L1 blocks among the hits: tier hits load only while more blocks than these are free. */
  numProtected: number;
  /** Free blocks among blockIds (what allocateSlots takes off the free queue besides new blocks). */
  numFreeIds: number;
  /** The hash of the block the search stopped at (undefined: every full block hit), and what each tier held there. */
  missHash: KvBlockHash | undefined;
  missL2: KvBlockIdentity | undefined;
  missL3: KvBlockIdentity | undefined;
  l2Seq: number | undefined;
  l3Seq: number | undefined;
}

/** What a lookup that loaded nothing reports (most do; a waiting request is looked up at every step): shared, frozen. */
const NOTHING_LOADED: Pick<ComputedBlocks, "fromTier" | "loadedBlockIds"> = Object.freeze({ fromTier: Object.freeze([]), loadedBlockIds: Object.freeze([]) });

/** takeEvictionTransfers' answer when nothing was evicted (most steps): shared, frozen. */
const NO_TRANSFERS: readonly KvTransfer[] = Object.freeze([]);

/** allocateSlots' answer when it took no new block: shared, never mutated (frozen). */
const NO_FRESH_BLOCKS: number[] = Object.freeze([]) as unknown as number[];
/**
 * Entries of the change log (the last blocks registered or unregistered). A replay reads the entries since
 * its memo when there are fewer than its hits; between two lookups of a waiting request one step's worth of
 * blocks changes (its decoded blocks, and the blocks an admitted request loads).
 */
const CHANGE_LOG_SIZE = 8192;

/** A hit's entry in Found.blocks: its L1 block, or which tier holds it. */
function blockEntry(hit: Hit): number {
  return hit.kind === "L1" ? hit.block : hit.kind === "L2" ? TIER_L2 : TIER_L3;
}

function checkInt(field: string, v: number, min: number): void {
  if (!Number.isInteger(v) || v < min) {
    throw new ArborError(`kv block manager: ${field} must be an integer >= ${min}, got ${v}`, "config");
  }
}

/**
 * The generation after `gen` for per-block marks (`marks[b] === gen`: marked): past the largest, every
 * mark is cleared and the count starts again at 1 (0 is never a generation: it is the cleared mark).
 */
function nextGeneration(marks: Uint32Array, gen: number): number {
  if (gen < 0xffffffff) return gen + 1;
  marks.fill(0);
  return 1;
}

function saltRoot(salt: string | undefined, hashFn: KvHashFn): KvBlockIdentity | null {
  if (salt === undefined) return null;
  // The salt is the root "block": its characters are its tokens, so identity checks compare salts.
  const chars = Array.from(salt, (c) => c.codePointAt(0) ?? 0);
  return makeRootIdentity(hashFn(null, chars, ["cache_salt"]), chars);
}

/**
 * Paged KV allocator with prefix caching. A block is either referenced by running requests
 * (refCount > 0) or in the free queue (refCount 0), where a block that still carries a hash is a
 * cached block: reusable by a prefix hit until it reaches the queue's head and is evicted.
 */
export class KvBlockManager {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly enablePrefixCaching: boolean;
  readonly bytesPerToken: number;
  private readonly l2: KvTier | undefined;
  private readonly l3: KvTier | undefined;
  private readonly hashFn: KvHashFn;
  private root: KvBlockIdentity | null;
  private readonly refCount: Int32Array;
  private readonly identity: (KvBlockIdentity | null)[];
  /** Per block: a stamp taken from stampSeq each time the block is registered or unregistered. */
  private readonly stamp: Float64Array;
  private stampSeq = 0;
  /** changeLog[s % CHANGE_LOG_SIZE]: the block given stamp s (for the stamps not yet overwritten). */
  private readonly changeLog = new Int32Array(CHANGE_LOG_SIZE);
  /** replayChanged's scratch list of positions (reused: it runs at every step of a waiting request). */
  private readonly changedAt: number[] = [];
  /** Bumped by resetPrefixCache: every lookup memo from before is void. */
  private epoch = 0;
  /** Per request hash chain, its last lookup (weak: a finished request's memo goes with its chain). */
  private readonly memos = new WeakMap<object, LookupMemo>();
  /** Scratch marks of one call (checkComputedBlocks' duplicates, a lookup's protected blocks): mark[b] === that call's generation. */
  private readonly mark: Uint32Array;
  private markGen = 0;
  /** Per block, its L1 hit while its identity stays (immutable, shared by lookups: no object per block per lookup). */
  private readonly l1Hit: (Hit | undefined)[];
  private readonly queue: FreeBlockQueue;
  /**
   * hashKey(hash) → the L1 blocks registered under that key, in registration order. Several blocks carry one
   * hash when identical blocks were computed twice, or on a collision, and distinct hashes may share a key:
   * a walk compares hashes. See KeyChains for why not string keys and an array per hash.
   */
  private readonly cached: KeyChains;
  private readonly requests = new Map<string, RequestKv>();
  private readonly counters: KvBlockManagerStats = { queries: 0, hits: 0, evictions: 0, offloadedBlocks: 0, loadedBlocks: 0 };
  private readonly pendingEvictionOffload = { L2: 0, L3: 0 };
  /** See RepeatableLookup: the last lookup, the blocks and hashes it watches, and the change counter. */
  private repeatable: RepeatableLookup | undefined;
  /** The last lookup's answer, which allocateSlots takes as verified and counted while nothing changed since. */
  private lastLookup: LastLookup | undefined;
  /** Bumped at every change of a block's reference count or identity (touched). */
  private touchSeq = 0;
  /**
   * watchBlock[b] === watchGen: block b is one of the L1 hits of `watched`, the last lookup memo built
   * (the last lookup's), at position watchPos[b]. A replay of that memo finds its changed hits from the
   * change log through these marks, and a change to a marked block voids the repeatable lookup.
   */
  private watchBlock: Uint32Array;
  private readonly watchPos: Int32Array;
  private watchGen = 1;
  private watched: LookupMemo | undefined;
  /** The watched lookup's request: a block registered under its hash at a depth up to watchDepth is watched. */
  private watchChain: BlockHashChain | undefined;
  private watchDepth = -1;
  /** Bumped when the watched request changes, and when a block is registered under its hash. */
  private watchEpoch = 0;
  private hashSeq = 0;
  private lookupSeq = 0;

  constructor(opts: KvBlockManagerOptions) {
    checkInt("blockSize", opts.blockSize, 1);
    checkInt("numBlocks", opts.numBlocks, 1);
    const bpt = opts.bytesPerToken ?? 0;
    if (!(bpt >= 0) || !Number.isFinite(bpt)) {
      throw new ArborError(`kv block manager: bytesPerToken must be a finite number >= 0, got ${bpt}`, "config");
    }
    if (opts.l2 !== undefined && opts.l2.name !== "L2") throw new ArborError(`kv block manager: l2 is a tier named ${opts.l2.name}`, "config");
    if (opts.l3 !== undefined && opts.l3.name !== "L3") throw new ArborError(`kv block manager: l3 is a tier named ${opts.l3.name}`, "config");
    if ((opts.l2 !== undefined || opts.l3 !== undefined) && !opts.enablePrefixCaching) {
      throw new ArborError("kv block manager: l2/l3 tiers need enablePrefixCaching (offloaded blocks are found again by hash)", "config");
    }
    this.blockSize = opts.blockSize;
    this.numBlocks = opts.numBlocks;
    this.enablePrefixCaching = opts.enablePrefixCaching;
    this.bytesPerToken = bpt;
    this.l2 = opts.l2;
    this.l3 = opts.l3;
    this.hashFn = opts.hashFn ?? hashBlockTokens;
    this.root = saltRoot(opts.cacheSalt, this.hashFn);
    this.refCount = new Int32Array(opts.numBlocks);
    this.identity = new Array<KvBlockIdentity | null>(opts.numBlocks).fill(null);
    this.stamp = new Float64Array(opts.numBlocks);
    this.mark = new Uint32Array(opts.numBlocks);
    this.l1Hit = new Array<Hit | undefined>(opts.numBlocks).fill(undefined);
    this.queue = new FreeBlockQueue(opts.numBlocks);
    this.watchBlock = new Uint32Array(opts.numBlocks);
    this.watchPos = new Int32Array(opts.numBlocks);
    this.cached = new KeyChains(opts.numBlocks);
  }

  /**
   * Changes the cache salt for requests admitted from now on (e.g. after a weight update): blocks
   * cached under the old salt stay until evicted but never match new lookups.
   */
  setCacheSalt(salt: string | undefined): void {
    this.root = saltRoot(salt, this.hashFn);
  }

  /**
   * Prefix-cache lookup over full blocks, never the whole prompt (the last token is always
   * computed, as vLLM). Blocks only in L2/L3 are loaded into free L1 blocks now (counted in
   * `loadedBlocks` and reported in `fromTier`); hits must be passed to `allocateSlots` in the same step.
   * `chain` keeps the request's block hashes between calls (its tokens must only grow by appending).
   * `numTokens`: how many of `tokenIds` are the request's (default all; a scheduler's buffer has room after them).
   */
  getComputedBlocks(tokenIds: ArrayLike<number>, chain?: BlockHashChain, numTokens: number = tokenIds.length): ComputedBlocks {
    if (!this.enablePrefixCaching) return { blockIds: [], numCachedTokens: 0, ...NOTHING_LOADED };
    const bs = this.blockSize;
    const again = this.repeatable;
    if (again !== undefined && again.chain === chain && this.unchangedFor(again, numTokens)) {
      this.counters.queries += numTokens;
      this.counters.hits += again.numCachedTokens;
      return { blockIds: again.blockIds, numCachedTokens: again.numCachedTokens, fromTier: NOTHING_LOADED.fromTier, loadedBlockIds: NOTHING_LOADED.loadedBlockIds };
    }
    const maxBlocks = numTokens > 0 ? Math.floor((numTokens - 1) / bs) : 0;
    // With tiers asked, findPrefix gives the request's memo, the watched one.
    const memo = this.findPrefix(tokenIds, maxBlocks, true, chain ?? new BlockHashChain()) as LookupMemo;
    const { hits, blocks } = memo;

    let firstTier = hits.length;
    /** Whether every tier hit can be watched (see watchableTier), told by its tier alone (blocks[i]), not its hit object. */
    let tiersWatchable = true;
    const l2Watchable = this.l2 !== undefined && this.watchableTier("L2", this.l2);
    const l3Watchable = this.l3 !== undefined && this.watchableTier("L3", this.l3);
    // (Past the first tier hit, only a tier that cannot be watched is looked for.)
    const allWatchable = (this.l2 === undefined || l2Watchable) && (this.l3 === undefined || l3Watchable);
    for (let i = 0; i < blocks.length; i++) {
      const b = blocks[i] as number;
      if (b >= 0) continue;
      if (firstTier === hits.length) firstTier = i;
      if (!(b === TIER_L2 ? l2Watchable : l3Watchable)) tiersWatchable = false;
      if (allWatchable || !tiersWatchable) break;
    }
    this.countFreeHits(memo, firstTier);
    // Loaded blocks need free L1 blocks other than the cached free blocks this hit reuses. (The hits
    // are distinct blocks: a block's identity has one depth.)
    const numProtected = memo.freeHits;
    /** Free L1 hits before the first tier hit: every free block of blockIds when nothing loads. */
    const freeBeforeTier = memo.freeBefore;
    let spare = this.queue.length - numProtected;
    let keep = hits.length;
    for (let i = firstTier; i < blocks.length; i++) {
      if ((blocks[i] as number) >= 0) continue;
      if (spare === 0) {
        keep = i;
        break;
      }
      spare--;
    }

    // Up to the first tier hit every hit is an L1 block.
    const blockIds: number[] = blocks.slice(0, Math.min(keep, firstTier));
    const loadedBlockIds: number[] = [];
    const loaded = { L2: 0, L3: 0 };
    /**
     * A free block is protected when it is one of the hits (marked: the memo is the watched one, its L1 hits
     * marked) or was loaded into now (mark[b] === protectedGen, a generation taken at the first load).
     */
    let protectedGen = 0;
    let scan: number | undefined;
    /** Free L1 hits between the first tier hit and `keep` (blockIds' free blocks are these, those before, and the loaded ones). */
    let freeBetween = 0;
    for (let i = blockIds.length; i < keep; i++) {
      const h = hits[i] as Hit;
      if (h.kind === "L1") {
        blockIds.push(h.block);
        if (this.refCount[h.block] === 0) freeBetween++;
        continue;
      }
      if (protectedGen === 0) {
        protectedGen = this.newMarkGen();
        scan = this.queue.peek();
      }
      // The hit's own identity: the tier finds its entry from the slot it noted on it, without a search.
      h.tier.use(h.id);
      // The first free block from the head that is not protected. The blocks before `scan` were passed as
      // protected and stay so (loads only add protected blocks, at the tail): no rescan from the head.
      while (scan !== undefined && (this.watchBlock[scan] === this.watchGen || this.mark[scan] === protectedGen)) scan = this.queue.after(scan);
      if (scan === undefined) throw new Error("kv block manager: no free block to load into (accounting bug)");
      const b = scan;
      scan = this.queue.after(b);
      this.queue.remove(b);
      this.evict(b);
      this.register(b, h.id);
      this.queue.pushBack(b);
      this.mark[b] = protectedGen;
      blockIds.push(b);
      loadedBlockIds.push(b);
      loaded[h.kind]++;
    }
    this.counters.loadedBlocks += loaded.L2 + loaded.L3;
    const numCachedTokens = blockIds.length * bs;
    this.counters.queries += numTokens;
    this.counters.hits += numCachedTokens;
    const watchable = loaded.L2 + loaded.L3 === 0 && tiersWatchable;
    // Without loads, blockIds are the hits before the first tier hit (a tier hit loads unless no block is spare).
    this.rememberLookup(chain, tokenIds, numTokens, hits.length, maxBlocks, blockIds, numCachedTokens, numProtected, freeBeforeTier, firstTier < hits.length, watchable);
    this.lastLookup = { blockIds, chain, numTokens, epoch: this.epoch, root: this.root, stampSeq: this.stampSeq, touchSeq: this.touchSeq, numFree: freeBeforeTier + freeBetween + loadedBlockIds.length };
    if (loadedBlockIds.length === 0) return { blockIds, numCachedTokens, fromTier: NOTHING_LOADED.fromTier, loadedBlockIds: NOTHING_LOADED.loadedBlockIds };
    const fromTier: { tier: "L2" | "L3"; blocks: number }[] = [];
    if (loaded.L2 > 0) fromTier.push({ tier: "L2", blocks: loaded.L2 });
    if (loaded.L3 > 0) fromTier.push({ tier: "L3", blocks: loaded.L3 });
    return { blockIds, numCachedTokens, fromTier, loadedBlockIds };
  }

  /**
   * Reserves slots so that the request holds KV for numComputedTokens + numNewTokens tokens, where
   * numComputedTokens is what it already holds plus `newComputedBlocks` (hits from
   * getComputedBlocks, taken first, only before its first allocation). Returns the new block ids,
   * or null with nothing changed when free blocks are short (the scheduler then preempts). `chain`
   * as in getComputedBlocks.
   */
  allocateSlots(
    requestId: string,
    tokenIds: ArrayLike<number>,
    numNewTokens: number,
    newComputedBlocks: readonly number[] = [],
    chain?: BlockHashChain,
    /** The request's handle (handleOf), when the caller holds one. */
    handle?: KvRequestHandle,
    /** How many of `tokenIds` are the request's tokens (a scheduler's buffer has room after them). */
    numTokens: number = tokenIds.length,
  ): readonly number[] | null {
    if (!Number.isInteger(numNewTokens) || numNewTokens < 0) {
      throw new Error(`allocateSlots(${requestId}): numNewTokens must be an integer >= 0, got ${numNewTokens}`);
    }
    const bs = this.blockSize;
    const existing = this.recordOf(requestId, handle);
    if (newComputedBlocks.length > 0 && existing !== undefined && existing.blocks.length > 0) {
      throw new Error(`allocateSlots(${requestId}): newComputedBlocks given but the request already holds ${existing.blocks.length} blocks`);
    }
    const touchFree = newComputedBlocks.length > 0 ? this.freeAmongHits(requestId, tokenIds, numTokens, newComputedBlocks, chain) : 0;
    const held = existing?.numTokens ?? 0;
    const target = held + newComputedBlocks.length * bs + numNewTokens;
    const haveBlocks = (existing?.blocks.length ?? 0) + newComputedBlocks.length;
    const need = Math.max(0, Math.ceil(target / bs) - haveBlocks);
    if (need + touchFree > this.queue.length) return null;

    const req: RequestKv = existing ?? { requestId, owner: this, live: true, blocks: [], numTokens: 0, numHashed: 0, root: this.root, tail: this.root, cacheable: this.enablePrefixCaching };
    if (existing === undefined) this.requests.set(requestId, req);
    for (const b of newComputedBlocks) {
      this.touched(b);
      if (this.refCount[b] === 0) {
        this.queue.remove(b);
        this.freeChanged(b, false);
      }
      this.refCount[b] = (this.refCount[b] ?? 0) + 1;
      req.blocks.push(b);
    }
    if (newComputedBlocks.length > 0) {
      req.numHashed = newComputedBlocks.length;
      req.tail = this.identity[newComputedBlocks[newComputedBlocks.length - 1] as number] ?? null;
    }
    // Most calls (a decode step inside a block) take no block: one shared empty answer, no array per call.
    const fresh: number[] = need === 0 ? NO_FRESH_BLOCKS : [];
    for (let i = 0; i < need; i++) {
      const b = this.queue.popFront();
      if (b === undefined) throw new Error("kv block manager: free queue ran dry (accounting bug)");
      this.evict(b);
      this.touched(b);
      this.freeChanged(b, false);
      this.refCount[b] = 1;
      req.blocks.push(b);
      fresh.push(b);
    }
    req.numTokens = target;
    if (req.cacheable) this.cacheFullBlocks(req, tokenIds, numTokens, chain ?? new BlockHashChain());
    return fresh;
  }

  /**
   * Shrinks a request's slots to `numTokens` (speculative decoding: the positions of rejected draft
   * tokens). Blocks no longer needed go back to the front of the free queue: they were never
   * hashed (drafts are not part of the request's tokens), so they cache nothing. Unknown requests
   * and a `numTokens` at or above what the request holds are ignored.
   */
  trimSlots(requestId: string, numTokens: number): void {
    if (!Number.isInteger(numTokens) || numTokens < 0) throw new Error(`trimSlots(${requestId}): numTokens must be an integer >= 0, got ${numTokens}`);
    const req = this.requests.get(requestId);
    if (req === undefined || numTokens >= req.numTokens) return;
    const keep = Math.ceil(numTokens / this.blockSize);
    if (keep < req.numHashed) throw new Error(`trimSlots(${requestId}): ${numTokens} tokens would drop hashed blocks (${req.numHashed} hashed)`);
    for (const b of req.blocks.splice(keep).reverse()) {
      const rc = (this.refCount[b] ?? 0) - 1;
      if (rc < 0) throw new Error(`trimSlots(${requestId}): block ${b} refCount would go negative`);
      this.touched(b);
      this.refCount[b] = rc;
      if (rc === 0) {
        this.queue.pushFront(b);
        this.freeChanged(b, true);
      }
    }
    req.numTokens = numTokens;
  }

  /**
   * Releases a request's blocks (refCount − 1), tail first so that a prompt's last blocks are
   * evicted before its first ones. Blocks reaching 0 join the free queue; hashed ones stay
   * reusable as cached blocks until evicted. Unknown requests are ignored.
   */
  free(requestId: string): void {
    const req = this.requests.get(requestId);
    if (req === undefined) return;
    this.release(requestId, req);
  }

  /** The request's handle while it holds KV (undefined when it holds none): see KvRequestHandle. */
  handleOf(requestId: string): KvRequestHandle | undefined {
    return this.requests.get(requestId);
  }

  /** Blocks the request holds, in order. */
  blocksOf(requestId: string): readonly number[] {
    return this.requests.get(requestId)?.blocks ?? [];
  }

  /**
   * Reads the KV records of `requests` (their map entries, records and block lists) ahead of a step's
   * allocateSlots calls, in one loop whose loads do not wait on each other: at scale every record is a cache
   * miss, and the processor then fetches many at once rather than one per call. Returns a number only so the
   * reads are kept; nothing changes.
   */
  touchRecords(requests: readonly { readonly requestId: string; readonly kvHandle?: KvRequestHandle }[]): number {
    let sum = 0;
    for (let k = 0; k < requests.length; k++) {
      const r = requests[k] as { requestId: string; kvHandle?: KvRequestHandle };
      const rec = this.recordOf(r.requestId, r.kvHandle);
      if (rec !== undefined) sum += rec.numTokens + rec.blocks.length;
    }
    return sum;
  }

  /** Tokens the request holds KV slots for (0 when unknown). */
  numTokensOf(requestId: string): number {
    return this.requests.get(requestId)?.numTokens ?? 0;
  }

  /** Free blocks, cached ones included (vLLM's get_num_free_blocks). */
  numFreeBlocks(): number {
    return this.queue.length;
  }

  /** L1 blocks carrying a prefix-cache hash (referenced or not). */
  numCachedBlocks(): number {
    let n = 0;
    for (const id of this.identity) if (id !== null) n++;
    return n;
  }

  /** Fraction of blocks referenced by running requests, 0..1 (vllm:kv_cache_usage_perc). */
  usage(): number {
    return (this.numBlocks - this.queue.length) / this.numBlocks;
  }

  /** Counters since construction (a copy). */
  stats(): KvBlockManagerStats {
    return { ...this.counters };
  }

  /** One block's state. */
  blockInfo(blockId: number): KvBlockInfo {
    this.checkBlockId("blockInfo", blockId);
    const id = this.identity[blockId] ?? null;
    return { refCount: this.refCount[blockId] ?? 0, free: this.queue.has(blockId), hash: id?.hash ?? null, tokenIds: id?.tokenIds ?? null };
  }

  /** The whole prefix a cached block stands for (its chain's tokens, salt excluded), or null. */
  blockPrefix(blockId: number): number[] | null {
    this.checkBlockId("blockPrefix", blockId);
    const chain: KvBlockIdentity[] = [];
    for (let id = this.identity[blockId] ?? null; id !== null && id.depth >= 0; id = id.parent) chain.push(id);
    if (chain.length === 0) return null;
    return chain.reverse().flatMap((id) => [...id.tokenIds]);
  }

  /** Block ids in the free queue, next-to-evict first. */
  freeQueueOrder(): number[] {
    return this.queue.toArray();
  }

  /**
   * Transfers caused by evictions since the last call (cached blocks offloaded to L2, or to L3
   * when there is no L2), one per tier, so that the scheduler can charge them to the step.
   */
  takeEvictionTransfers(): readonly KvTransfer[] {
    // Called at every step; most steps evict nothing.
    const pending = this.pendingEvictionOffload;
    if (pending.L2 === 0 && pending.L3 === 0) return NO_TRANSFERS;
    // (At scale most steps do evict: no list of tier names and no new counters per call.)
    const out: KvTransfer[] = [];
    if (pending.L2 > 0) out.push({ from: "L1", to: "L2", blocks: pending.L2, bytes: this.blockBytes(pending.L2) });
    if (pending.L3 > 0) out.push({ from: "L1", to: "L3", blocks: pending.L3, bytes: this.blockBytes(pending.L3) });
    pending.L2 = 0;
    pending.L3 = 0;
    return out;
  }

  /**
   * Drops every cached block, e.g. after a weight update or /sleep. Returns how many unreferenced
   * cached blocks were dropped. Blocks still referenced lose their hash too (their KV predates the
   * reset) and their requests register nothing more. L2/L3 are not cleared (L3 is shared): on a
   * weight update also call setCacheSalt so that their old-version entries never match.
   */
  resetPrefixCache(): number {
    let dropped = 0;
    for (let b = 0; b < this.numBlocks; b++) {
      if (this.identity[b] === null) continue;
      if (this.refCount[b] === 0) dropped++;
      this.identity[b] = null;
      this.l1Hit[b] = undefined;
    }
    this.cached.clear();
    this.epoch++;
    for (const req of this.requests.values()) {
      req.cacheable = false;
      req.numHashed = 0;
    }
    return dropped;
  }

  /**
   * Pauses a program (ThunderAgent): puts the request's full hashed blocks in tier `to` and frees
   * them from L1, where they become the first to be evicted. Returns the transfer (blocks already
   * in the tier are not sent again), or null when that tier is not configured. The program's next
   * request finds them again through getComputedBlocks.
   */
  offloadRequest(requestId: string, to: "L2" | "L3"): KvTransfer | null {
    const tier = to === "L2" ? this.l2 : this.l3;
    if (tier === undefined) return null;
    const req = this.requests.get(requestId);
    if (req === undefined) throw new Error(`offloadRequest(${requestId}): the request holds no KV blocks`);
    const hashed = req.blocks.slice(0, req.numHashed);
    const { sent, covered } = this.copyToTier(tier, hashed);
    this.release(requestId, req);
    this.demote(covered);
    return { from: "L1", to, blocks: sent, bytes: this.blockBytes(sent) };
  }

  /**
   * Like offloadRequest for a program whose request already finished: offloads the cached L1
   * blocks of `tokenIds`' longest cached prefix (full blocks only). Null when no such tier.
   */
  offloadPrefix(tokenIds: ArrayLike<number>, to: "L2" | "L3"): KvTransfer | null {
    const tier = to === "L2" ? this.l2 : this.l3;
    if (tier === undefined) return null;
    const { blocks: found } = this.findPrefix(tokenIds, Math.floor(tokenIds.length / this.blockSize), false, new BlockHashChain());
    const blocks = found.filter((b) => b >= 0);
    const { sent, covered } = this.copyToTier(tier, blocks);
    this.demote(covered.filter((b) => this.refCount[b] === 0));
    return { from: "L1", to, blocks: sent, bytes: this.blockBytes(sent) };
  }

  /** Invariant check used by tests; throws a descriptive Error when violated. */
  checkInvariants(): void {
    this.queue.check();
    const held = new Int32Array(this.numBlocks);
    for (const [rid, req] of this.requests) {
      const want = Math.ceil(req.numTokens / this.blockSize);
      if (req.blocks.length !== want) {
        throw new Error(`request ${rid}: holds ${req.blocks.length} blocks for ${req.numTokens} tokens (want ${want})`);
      }
      if (req.numHashed > req.blocks.length) throw new Error(`request ${rid}: numHashed ${req.numHashed} > blocks ${req.blocks.length}`);
      const seen = new Set<number>();
      for (const b of req.blocks) {
        if (seen.has(b)) throw new Error(`request ${rid}: holds block ${b} twice`);
        seen.add(b);
        held[b] = (held[b] ?? 0) + 1;
      }
      for (let i = 0; i < req.numHashed; i++) {
        const id = this.identity[req.blocks[i] ?? -1];
        if (id === null || id === undefined) throw new Error(`request ${rid}: hashed block #${i} has no identity`);
        if (id.depth !== i) throw new Error(`request ${rid}: block #${i} has identity depth ${id.depth}`);
      }
    }
    for (let b = 0; b < this.numBlocks; b++) {
      const rc = this.refCount[b] ?? 0;
      if (rc < 0) throw new Error(`block ${b}: negative refCount ${rc}`);
      if (rc !== held[b]) throw new Error(`block ${b}: refCount ${rc} but held by ${held[b]} requests`);
      if (rc > 0 && this.queue.has(b)) throw new Error(`block ${b}: both free and referenced (refCount ${rc})`);
      if (rc === 0 && !this.queue.has(b)) throw new Error(`block ${b}: unreferenced but not in the free queue`);
      const id = this.identity[b] ?? null;
      if (id !== null && id.key !== hashKey(id.hash)) throw new Error(`block ${b}: key ${id.key} is not its hash's (${id.hash})`);
      if (id !== null && !this.chainOf(id.key).includes(b)) throw new Error(`block ${b}: hash ${id.hash} not indexed`);
    }
    let indexed = 0;
    for (const key of this.cached.keys()) {
      for (const b of this.chainOf(key)) {
        if (this.identity[b]?.key !== key) throw new Error(`prefix cache: key ${key} indexes block ${b} which carries ${this.identity[b]?.hash ?? "no hash"}`);
        indexed++;
      }
    }
    // (Each block carries one key, so a chain that ran into another key's blocks would be caught above.)
    if (indexed !== this.numCachedBlocks()) throw new Error(`prefix cache: ${indexed} blocks indexed, ${this.numCachedBlocks()} carry a hash`);
    const u = this.usage();
    if (u < 0 || u > 1) throw new Error(`usage ${u} outside 0..1`);
    this.checkMarks();
    const last = this.lastLookup;
    if (last !== undefined && this.isCurrent(last)) {
      const free = this.countFree(last.blockIds);
      if (free !== last.numFree) throw new Error(`last lookup: counts ${last.numFree} free blocks among its hits, ${free} are free`);
    }
    const again = this.repeatable;
    if (again !== undefined && this.unchangedFor(again, again.numTokens)) {
      const free = this.countFree(again.blockIds);
      if (free !== again.numFreeIds) throw new Error(`repeatable lookup: counts ${again.numFreeIds} free blocks among its hits, ${free} are free`);
    }
  }

  /** A generation for `mark` no block carries yet (a new one unmarks every block at once). */
  private newMarkGen(): number {
    this.markGen = nextGeneration(this.mark, this.markGen);
    return this.markGen;
  }

  /** The last memo's blocks are its hits', and the marked blocks are exactly its L1 hits, each at its position (for the invariant check). */
  private checkMarks(): void {
    const hits = this.watched?.hits ?? [];
    const blocks = this.watched?.blocks ?? [];
    if (blocks.length !== hits.length || (this.watched?.stamps.length ?? 0) !== hits.length) throw new Error(`lookup memo: ${hits.length} hits, ${blocks.length} blocks`);
    let l1 = 0;
    for (let i = 0; i < hits.length; i++) {
      const h = hits[i] as Hit;
      if (blocks[i] !== blockEntry(h)) throw new Error(`lookup memo: hit ${i} has block ${blocks[i]}, not its hit's`);
      if (h.kind !== "L1") continue;
      l1++;
      if (this.watchBlock[h.block] !== this.watchGen || this.watchPos[h.block] !== i) throw new Error(`lookup marks: hit ${i} (block ${h.block}) is not marked at its position`);
    }
    let marked = 0;
    for (let b = 0; b < this.numBlocks; b++) if (this.watchBlock[b] === this.watchGen) marked++;
    if (marked !== l1) throw new Error(`lookup marks: ${marked} blocks marked for ${l1} L1 hits`);
    const w = this.watched;
    if (w?.counted) {
      const free = (i: number): boolean => (blocks[i] as number) >= 0 && this.refCount[blocks[i] as number] === 0;
      const all = blocks.filter((_, i) => free(i)).length;
      const before = blocks.filter((_, i) => i < w.countedTier && free(i)).length;
      if (all !== w.freeHits || before !== w.freeBefore) {
        throw new Error(`lookup memo: counts ${w.freeHits} free hits (${w.freeBefore} before ${w.countedTier}), ${all} (${before}) are free`);
      }
    }
  }

  /** The L1 blocks indexed under `key`, in registration order (for the invariant check). */
  private chainOf(key: number): number[] {
    const out: number[] = [];
    for (let b = this.cached.first(key); b !== NO_SLOT && out.length <= this.numBlocks; b = this.cached.next(b)) out.push(b);
    return out;
  }

  /** Whether an L1 block carries `hash` (its key `key`). */
  private carriesHash(hash: KvBlockHash, key: number): boolean {
    for (let b = this.cached.first(key); b !== NO_SLOT; b = this.cached.next(b)) if (this.identity[b]?.hash === hash) return true;
    return false;
  }

  private blockBytes(blocks: number): number {
    return blocks * this.blockSize * this.bytesPerToken;
  }

  private checkBlockId(where: string, b: number): void {
    if (!Number.isInteger(b) || b < 0 || b >= this.numBlocks) throw new Error(`${where}: no block ${b} (numBlocks ${this.numBlocks})`);
  }

  /** Longest verified prefix of `tokenIds` over `maxBlocks` blocks, from L1 and (if `useTiers`) L2/L3. */
  private findPrefix(tokenIds: ArrayLike<number>, maxBlocks: number, useTiers: boolean, chain: BlockHashChain): Found {
    chain.useRoot(this.root, this.hashFn);
    // The chain's proofs from earlier lookups make a repeated lookup (a request waiting for KV) O(1) per block.
    const verifier = new PrefixVerifier(chain);
    // Replay the request's previous lookup (see LookupMemo), searching again only the blocks whose hit
    // changed; then search on from its end. A block's hit depends on the request's tokens up to it, not on
    // which of several content-equal identities the block before it was found as, so the hits after a
    // changed one stay what a search would find.
    const old = useTiers ? this.memos.get(chain.lineage) : undefined;
    const memo = old !== undefined && old.epoch === this.epoch && old.root === this.root ? old : undefined;
    // The memo is updated in place: its arrays are reused (a waiting request's prefix can be hundreds of
    // blocks, looked up at every step).
    const found: Found = memo ?? { hits: [], blocks: [], stamps: [] };
    const { hits } = found;
    let missed = false;
    /** Whether the marks (watchBlock) still index this memo's hits: kept up to date below instead of rebuilt. */
    let marked = false;
    if (memo !== undefined) {
      // Watched since the memo, nothing registered under its hashes, the tiers unchanged: its tier hits stand.
      const tiersSame =
        memo.watchEpoch === this.watchEpoch && this.watchChain === chain && memo.hashSeq === this.hashSeq && memo.l2Seq === this.l2?.changeSeq && memo.l3Seq === this.l3?.changeSeq;
      const logged = this.stampSeq - memo.stampSeq;
      if (tiersSame && this.watched === memo && hits.length <= maxBlocks && logged <= CHANGE_LOG_SIZE && logged < hits.length) {
        marked = true;
        missed = this.replayChanged(memo, tokenIds, useTiers, chain, verifier);
      } else {
        // Its marks are made anew below (markHits), and its counts with them.
        memo.counted = false;
        missed = this.replayAll(memo, tokenIds, maxBlocks, tiersSame, useTiers, chain, verifier);
      }
    }
    let prev = hits.length === 0 ? this.root : (hits[hits.length - 1] as Hit).id;
    for (let i = hits.length; !missed && i < maxBlocks; i++) {
      const hit = this.searchAt(tokenIds, i, useTiers, chain, verifier, prev);
      if (hit === undefined) break;
      this.setHit(found, i, hit);
      if (marked && hit.kind === "L1") this.markHit(hit.block, i);
      prev = hit.id;
    }
    if (!useTiers) return found;
    const m: LookupMemo = memo ?? {
      epoch: this.epoch,
      root: this.root,
      ...found,
      watchEpoch: -1,
      hashSeq: 0,
      l2Seq: undefined,
      l3Seq: undefined,
      stampSeq: 0,
      counted: false,
      freeHits: 0,
      freeBefore: 0,
      countedTier: 0,
    };
    if (memo === undefined) this.memos.set(chain.lineage, m);
    m.watchEpoch = -1;
    m.hashSeq = 0;
    m.l2Seq = undefined;
    m.l3Seq = undefined;
    m.stampSeq = this.stampSeq;
    if (!marked) this.markHits(m);
    return m;
  }

  /** Sets hit `i` (at most one past the end) and its block and stamp. */
  private setHit(f: Found, i: number, hit: Hit): void {
    const w = this.watched;
    const counting = w === f && w.counted;
    if (counting) this.countAt(w, i, -1);
    f.hits[i] = hit;
    f.blocks[i] = blockEntry(hit);
    f.stamps[i] = hit.kind === "L1" ? (this.stamp[hit.block] as number) : 0;
    if (counting) this.countAt(w, i, 1);
  }

  /** Drops the hits from `i` on. */
  private truncateHits(f: Found, i: number): void {
    const w = this.watched;
    if (w === f && w.counted) for (let j = i; j < f.blocks.length; j++) this.countAt(w, j, -1);
    f.hits.length = i;
    f.blocks.length = i;
    f.stamps.length = i;
  }

  /**
   * The memo's replay checking every hit: an L1 hit whose block was (un)registered since (its stamp moved),
   * and a tier hit unless `tiersSame`, is searched again. Truncates the hits at the first miss and
   * returns whether there was one.
   */
  private replayAll(memo: LookupMemo, tokenIds: ArrayLike<number>, maxBlocks: number, tiersSame: boolean, useTiers: boolean, chain: BlockHashChain, verifier: PrefixVerifier): boolean {
    const { hits, blocks, stamps } = memo;
    const n = Math.min(hits.length, maxBlocks);
    let i = 0;
    let missed = false;
    // The dense blocks and stamps decide; a hit object is read only where its block changed.
    for (; i < n; i++) {
      const b = blocks[i] as number;
      if (b >= 0 ? this.stamp[b] === stamps[i] : tiersSame || this.sameTierHit(hits[i] as Extract<Hit, { kind: "L2" | "L3" }>)) continue;
      const hit = this.searchAt(tokenIds, i, useTiers, chain, verifier, i === 0 ? this.root : (hits[i - 1] as Hit).id);
      if (hit === undefined) {
        missed = true;
        break;
      }
      this.setHit(memo, i, hit);
    }
    this.truncateHits(memo, i);
    return missed;
  }

  /**
   * replayAll when the tier hits stand and the marks index the memo: the L1 hits to search again are the
   * marked blocks in the change log since the memo (every entry is a new stamp), in position order, so a
   * replay costs what changed rather than the request's whole prefix. Same result as replayAll.
   */
  private replayChanged(memo: LookupMemo, tokenIds: ArrayLike<number>, useTiers: boolean, chain: BlockHashChain, verifier: PrefixVerifier): boolean {
    const { hits, blocks, stamps } = memo;
    const changed = this.changedAt;
    changed.length = 0;
    for (let seq = memo.stampSeq + 1; seq <= this.stampSeq; seq++) {
      const b = this.changeLog[seq % CHANGE_LOG_SIZE] as number;
      if (this.watchBlock[b] === this.watchGen) changed.push(this.watchPos[b] as number);
    }
    if (changed.length > 1) changed.sort((a, b) => a - b);
    let last = -1;
    for (const i of changed) {
      if (i === last) continue;
      last = i;
      const b = blocks[i] as number;
      if (this.stamp[b] === stamps[i]) continue;
      this.watchBlock[b] = 0;
      const hit = this.searchAt(tokenIds, i, useTiers, chain, verifier, i === 0 ? this.root : (hits[i - 1] as Hit).id);
      if (hit === undefined) {
        for (let j = i + 1; j < blocks.length; j++) {
          const x = blocks[j] as number;
          if (x >= 0) this.watchBlock[x] = 0;
        }
        this.truncateHits(memo, i);
        return true;
      }
      this.setHit(memo, i, hit);
      if (hit.kind === "L1") this.markHit(hit.block, i);
    }
    return false;
  }

  /** Marks `memo`'s L1 hits (a new generation unmarks every other block at once). */
  private markHits(memo: LookupMemo): void {
    this.watchGen = nextGeneration(this.watchBlock, this.watchGen);
    // Counts are kept only through the marks: the memo watched until now keeps none from here on.
    if (this.watched !== undefined) this.watched.counted = false;
    memo.counted = false;
    this.watched = memo;
    const blocks = memo.blocks;
    for (let i = 0; i < blocks.length; i++) {
      const b = blocks[i] as number;
      if (b >= 0) this.markHit(b, i);
    }
  }

  private markHit(b: number, i: number): void {
    this.watchBlock[b] = this.watchGen;
    this.watchPos[b] = i;
  }

  /**
   * Brings the watched memo's free-hit counts to `firstTier`: counted in full when it keeps none, else only
   * the hits between the tier position it counted to and this one.
   */
  private countFreeHits(memo: LookupMemo, firstTier: number): void {
    const { blocks } = memo;
    if (!memo.counted) {
      let free = 0;
      let before = 0;
      for (let i = 0; i < blocks.length; i++) {
        const b = blocks[i] as number;
        if (b >= 0 && this.refCount[b] === 0) {
          free++;
          if (i < firstTier) before++;
        }
      }
      memo.freeHits = free;
      memo.freeBefore = before;
      memo.countedTier = firstTier;
      memo.counted = true;
      return;
    }
    const lo = Math.min(memo.countedTier, firstTier);
    const hi = Math.min(Math.max(memo.countedTier, firstTier), blocks.length);
    let between = 0;
    for (let i = lo; i < hi; i++) {
      const b = blocks[i] as number;
      if (b >= 0 && this.refCount[b] === 0) between++;
    }
    memo.freeBefore += firstTier > memo.countedTier ? between : -between;
    memo.countedTier = firstTier;
  }

  /** Adds (`d` 1) or takes out (−1) hit `i` of the watched memo `w` in its free-hit counts. */
  private countAt(w: LookupMemo, i: number, d: 1 | -1): void {
    const b = w.blocks[i];
    if (b === undefined || b < 0 || this.refCount[b] !== 0) return;
    w.freeHits += d;
    if (i < w.countedTier) w.freeBefore += d;
  }

  /** Block `b`'s refCount went from 0 to 1 (`free` false) or back to 0 (true): the watched memo's counts follow. */
  private freeChanged(b: number, free: boolean): void {
    const w = this.watched;
    if (w === undefined || !w.counted || this.watchBlock[b] !== this.watchGen) return;
    const d = free ? 1 : -1;
    w.freeHits += d;
    if ((this.watchPos[b] as number) < w.countedTier) w.freeBefore += d;
  }

  /** The hit for block `i` of a request whose block i − 1 was found as `prev`: L1 first, then L2, L3. */
  private searchAt(tokenIds: ArrayLike<number>, i: number, useTiers: boolean, chain: BlockHashChain, verifier: PrefixVerifier, prev: KvBlockIdentity | null): Hit | undefined {
    const bs = this.blockSize;
    // A hit's hash is the looked-up one, so the chain's hashes (from the root) are the lookup's keys.
    const hash = chain.hashOf(tokenIds, i, bs, this.root, this.hashFn);
    const key = chain.keyAt(i);
    for (let b = this.cached.first(key); b !== NO_SLOT; b = this.cached.next(b)) {
      const id = this.identity[b];
      if (id !== null && id !== undefined && id.hash === hash && verifier.acceptAt(id, tokenIds, i * bs, bs, prev)) return (this.l1Hit[b] ??= { kind: "L1", block: b, id });
    }
    if (!useTiers) return undefined;
    // The identity the request's chain proved at block i, when it has one, is what a tier most likely holds there:
    // a continuation's context was computed by the request it continues, whose blocks went to L2/L3 on eviction.
    const likely = chain.known[i];
    return this.tierHitAt(this.l2, hash, key, tokenIds, i, verifier, prev, likely) ?? this.tierHitAt(this.l3, hash, key, tokenIds, i, verifier, prev, likely);
  }

  /** `tier`'s entry for block `i` (hash `hash`, key `key`) when it holds the request's prefix. */
  private tierHitAt(
    tier: KvTier | undefined,
    hash: KvBlockHash,
    key: number,
    tokenIds: ArrayLike<number>,
    i: number,
    verifier: PrefixVerifier,
    prev: KvBlockIdentity | null,
    likely: KvBlockIdentity | undefined,
  ): Hit | undefined {
    const id = tier?.get(hash, key, likely);
    if (tier === undefined || id === undefined || !verifier.acceptAt(id, tokenIds, i * this.blockSize, this.blockSize, prev)) return undefined;
    // A tier hit names only its tier and identity: one object serves every lookup that finds it (lookup memos
    // keep ~600k at a quarter of seer-moonlight's scale, each otherwise its own object surviving scavenges).
    const cached = id[TIER_HIT] as Hit | undefined;
    if (cached !== undefined && cached.kind !== "L1" && cached.tier === tier) return cached;
    const hit: Hit = { kind: tier.name, tier, id };
    id[TIER_HIT] = hit;
    return hit;
  }

  /** Whether a lookup of `again`'s request with `numTokens` tokens would find exactly what it found. */
  private unchangedFor(again: RepeatableLookup, numTokens: number): boolean {
    if (again.numTokens !== numTokens || again.seq !== this.lookupSeq || again.epoch !== this.epoch || again.root !== this.root) return false;
    if (again.l2Seq !== this.l2?.changeSeq || again.l3Seq !== this.l3?.changeSeq) return false;
    // Tier hits load into free blocks other than the hits' own: none while no more blocks are free.
    if (again.tierHits && this.queue.length > again.numProtected) return false;
    const miss = again.missHash;
    return miss === undefined || (this.l2?.get(miss) === again.missL2 && this.l3?.get(miss) === again.missL3);
  }

  /**
   * Keeps a watchable lookup (it loaded nothing, and its tier hits can be watched) as the repeatable one,
   * watching the hashes it depends on (its L1 hits are marked already: findPrefix marks the last lookup's).
   */
  private rememberLookup(
    chain: BlockHashChain | undefined,
    tokenIds: ArrayLike<number>,
    numTokens: number,
    numHits: number,
    maxBlocks: number,
    blockIds: number[],
    numCachedTokens: number,
    numProtected: number,
    numFreeIds: number,
    tierHits: boolean,
    watchable: boolean,
  ): void {
    this.repeatable = undefined;
    const before = this.watchChain;
    this.watchChain = undefined;
    this.watchDepth = -1;
    // (An unwatchable lookup's marked blocks only bump lookupSeq needlessly until the next lookup.)
    if (chain === undefined || !watchable) {
      if (before !== undefined) this.watchEpoch++;
      return;
    }
    const missHash = numHits < maxBlocks ? chain.hashOf(tokenIds, numHits, this.blockSize, this.root, this.hashFn) : undefined;
    if (before !== chain) this.watchEpoch++;
    // Hashes are watched by depth: a block another request registers can only be this request's block
    // `d` (a tier hit's, or the block the search stopped at) if its identity has depth d and the chain's hash.
    this.watchChain = chain;
    this.watchDepth = numHits;
    const memo = this.memos.get(chain.lineage);
    if (memo !== undefined) {
      memo.watchEpoch = this.watchEpoch;
      memo.hashSeq = this.hashSeq;
      memo.l2Seq = this.l2?.changeSeq;
      memo.l3Seq = this.l3?.changeSeq;
    }
    this.repeatable = {
      chain,
      numTokens,
      epoch: this.epoch,
      root: this.root,
      seq: this.lookupSeq,
      blockIds,
      numCachedTokens,
      tierHits,
      numProtected,
      numFreeIds,
      missHash,
      missL2: missHash === undefined ? undefined : this.l2?.get(missHash),
      missL3: missHash === undefined ? undefined : this.l3?.get(missHash),
      l2Seq: this.l2?.changeSeq,
      l3Seq: this.l3?.changeSeq,
    };
  }

  /**
   * Whether a lookup's tier hit can be watched: each tier tells when it drops or replaces an entry, and an
   * L3 hit has no L2 in front of it (L2 taking its hash, a new one, would not bump L2's changeSeq).
   */
  private watchableTier(kind: "L2" | "L3", tier: KvTier): boolean {
    return !(kind === "L3" && this.l2 !== undefined) && tier.changeSeq !== undefined;
  }

  /** A watched block's identity or reference count changes: the repeatable lookup is void. */
  private touched(b: number): void {
    this.touchSeq++;
    if (this.watchBlock[b] === this.watchGen) this.lookupSeq++;
  }

  /**
   * Whether a tier hit of an earlier lookup is still what a search would find at its block: no L1 block
   * carries its hash (the search looks in L1 first), no tier before its own holds the hash, and its tier
   * still holds the very identity that was accepted (identities are immutable, and the request's chain
   * keeps the proof, so accepting it again after the same previous hit gives the same answer).
   */
  private sameTierHit(h: Extract<Hit, { kind: "L2" | "L3" }>): boolean {
    const { hash, key } = h.id;
    if (this.carriesHash(hash, key)) return false;
    if (h.kind === "L3" && this.l2 !== undefined && this.l2.get(hash, key) !== undefined) return false;
    return h.tier.get(hash, key) === h.id;
  }

  /**
   * The free blocks among a request's hits (newComputedBlocks), which admitting it takes out of the free queue:
   * verified and counted already when they are the repeatable lookup's or the lookup's just before (a waiting
   * request's admission is tried at every step while blocks are short, with hundreds of hits each time, and a
   * scheduler admits a request in the step it looked it up, often after loading some of its hits); else the hits
   * are verified (throwing for ones no longer valid) and counted. Its own method: allocateSlots runs for every
   * request at every step, and a larger body leaves V8 less room to inline what it calls.
   */
  private freeAmongHits(requestId: string, tokenIds: ArrayLike<number>, numTokens: number, hits: readonly number[], chain: BlockHashChain | undefined): number {
    // Nothing a repeatable lookup depends on changed since (every change of a hit's reference count touches it).
    const again = this.repeatable;
    if (again !== undefined && again.blockIds === hits && again.chain === chain && this.unchangedFor(again, numTokens)) return again.numFreeIds;
    // Nothing (un)registered or referenced since the last lookup.
    const last = this.lastLookup;
    if (last !== undefined && last.blockIds === hits && last.chain === chain && last.numTokens === numTokens && this.isCurrent(last)) return last.numFree;
    this.checkComputedBlocks(requestId, tokenIds, numTokens, hits, chain);
    return this.countFree(hits);
  }

  /** Whether nothing the last lookup's answer depends on changed since it was made. */
  private isCurrent(last: LastLookup): boolean {
    return last.epoch === this.epoch && last.root === this.root && last.stampSeq === this.stampSeq && last.touchSeq === this.touchSeq;
  }

  /** How many of `blocks` are free (refCount 0). */
  private countFree(blocks: readonly number[]): number {
    let free = 0;
    for (const b of blocks) if (this.refCount[b] === 0) free++;
    return free;
  }

  private checkComputedBlocks(requestId: string, tokenIds: ArrayLike<number>, numTokens: number, blocks: readonly number[], chain: BlockHashChain | undefined): void {
    const bs = this.blockSize;
    if (blocks.length * bs >= numTokens + 1) {
      throw new Error(`allocateSlots(${requestId}): ${blocks.length} computed blocks exceed the ${numTokens} tokens`);
    }
    // The lookup that found these blocks left its proofs in the request's chain: re-checking them is O(1) each.
    chain?.useRoot(this.root, this.hashFn);
    const verifier = new PrefixVerifier(chain);
    const gen = this.newMarkGen();
    let prev = this.root;
    for (let i = 0; i < blocks.length; i++) {
      const b = blocks[i] as number;
      // (The message is built only on failure: this runs for every block of every admission.)
      if (!(Number.isInteger(b) && b >= 0 && b < this.numBlocks)) this.checkBlockId(`allocateSlots(${requestId})`, b);
      if (this.mark[b] === gen) throw new Error(`allocateSlots(${requestId}): computed block ${b} given twice`);
      this.mark[b] = gen;
      const id = this.identity[b] ?? null;
      if (id === null || !verifier.acceptAt(id, tokenIds, i * bs, bs, prev)) {
        throw new Error(
          `allocateSlots(${requestId}): computed block ${b} no longer holds tokens ${i * bs}..${(i + 1) * bs - 1} ` +
            "(it was evicted; call getComputedBlocks and allocateSlots in the same step)",
        );
      }
      prev = id;
    }
  }

  /** Registers the request's newly full blocks in the prefix cache, chaining from the last one. */
  private cacheFullBlocks(req: RequestKv, tokenIds: ArrayLike<number>, numTokens: number, chain: BlockHashChain): void {
    const bs = this.blockSize;
    const numFull = Math.min(req.blocks.length, Math.floor(Math.min(req.numTokens, numTokens) / bs));
    // Called at every decode step of every request; a block fills once in blockSize steps.
    if (req.numHashed >= numFull) return;
    let parent = req.tail;
    for (let i = req.numHashed; i < numFull; i++) {
      const b = req.blocks[i];
      if (b === undefined) break;
      // Every registered block's hash chains from its request's root, so the chain's hash is this block's.
      const hash = chain.hashOf(tokenIds, i, bs, req.root, this.hashFn);
      const key = chain.keyAt(i);
      // Share the identity object of an identical block computed by another request: keeps chains short.
      let id: KvBlockIdentity | undefined;
      for (let other = this.cached.first(key); other !== NO_SLOT; other = this.cached.next(other)) {
        const o = this.identity[other];
        if (o !== null && o !== undefined && o.hash === hash && o.parent === parent && samePackedAt(o.packed, tokenIds, i * bs, bs)) {
          id = o;
          break;
        }
      }
      // Block i of a chain from a root (depth -1) or none is at depth i: told, so the parent is not read.
      const own = id ?? makeIdentityAt(hash, tokenIds, i * bs, bs, parent, key, i);
      if (this.identity[b] !== null) this.unregister(b);
      this.register(b, own);
      parent = own;
      req.numHashed = i + 1;
      req.tail = own;
    }
  }

  private register(b: number, id: KvBlockIdentity): void {
    const watched = this.watchChain;
    if (watched !== undefined && id.depth >= 0 && id.depth <= this.watchDepth && watched.hashAt(id.depth) === id.hash) {
      this.hashSeq++;
      this.lookupSeq++;
    } else if (this.watchBlock[b] === this.watchGen) {
      this.lookupSeq++;
    }
    this.identity[b] = id;
    this.stamp[b] = ++this.stampSeq;
    this.changeLog[this.stampSeq % CHANGE_LOG_SIZE] = b;
    this.l1Hit[b] = undefined;
    // Appended at the end of its key's chain (searches take the first block that holds the prefix).
    this.cached.add(id.key, b);
  }

  private unregister(b: number): KvBlockIdentity | null {
    const id = this.identity[b] ?? null;
    if (id === null) return null;
    this.touched(b);
    this.identity[b] = null;
    this.stamp[b] = ++this.stampSeq;
    this.changeLog[this.stampSeq % CHANGE_LOG_SIZE] = b;
    this.l1Hit[b] = undefined;
    this.cached.remove(id.key, b);
    return id;
  }

  /** Strips a block leaving the free queue for reuse of its cached content, offloading it first. */
  private evict(b: number): void {
    const id = this.unregister(b);
    if (id === null) return;
    this.counters.evictions++;
    const tier = this.l2 ?? this.l3;
    if (tier === undefined) return;
    // Held already: a use. Else offloaded.
    if (!tier.use(id) && tier.put(id)) {
      this.counters.offloadedBlocks++;
      this.pendingEvictionOffload[tier.name]++;
    }
  }

  /** Copies blocks' identities into `tier`; `covered` are the blocks whose content the tier now holds. */
  private copyToTier(tier: KvTier, blocks: readonly number[]): { sent: number; covered: number[] } {
    let sent = 0;
    const covered: number[] = [];
    for (const b of blocks) {
      const id = this.identity[b] ?? null;
      if (id === null) break;
      // Held already: a use. Else sent, unless the tier is full.
      if (!tier.use(id)) {
        if (!tier.put(id)) break;
        sent++;
      }
      covered.push(b);
    }
    this.counters.offloadedBlocks += sent;
    return { sent, covered };
  }

  /** Moves free blocks (a prefix, in order) to the queue's head, last block first in line. */
  private demote(blocks: readonly number[]): void {
    for (const b of blocks) {
      if (this.refCount[b] !== 0) continue;
      this.queue.remove(b);
      this.queue.pushFront(b);
    }
  }

  /** The request's record: its handle's when that is live and its own, else looked up by id. */
  private recordOf(requestId: string, handle: KvRequestHandle | undefined): RequestKv | undefined {
    if (handle !== undefined && (handle as RequestKv).owner === this && (handle as RequestKv).live && handle.requestId === requestId) return handle as RequestKv;
    return this.requests.get(requestId);
  }

  private release(requestId: string, req: RequestKv): void {
    req.live = false;
    this.requests.delete(requestId);
    for (let i = req.blocks.length - 1; i >= 0; i--) {
      const b = req.blocks[i];
      if (b === undefined) continue;
      const rc = (this.refCount[b] ?? 0) - 1;
      if (rc < 0) throw new Error(`free(${requestId}): block ${b} refCount would go negative`);
      this.touched(b);
      this.refCount[b] = rc;
      if (rc === 0) {
        this.queue.pushBack(b);
        this.freeChanged(b, true);
      }
    }
  }
}
