// Unit tests of the KV block manager in the style of vLLM's test_prefix_caching.py.
import { describe, expect, it } from "vitest";
import { BlockHashChain, hashKey } from "./block-hash.js";
import { KvBlockManager, type KvBlockManagerOptions } from "./block-manager.js";
import { InProcessKvTier } from "./tier.js";

const range = (n: number, start = 0): number[] => Array.from({ length: n }, (_, i) => start + i);

function mgr(opts: Partial<KvBlockManagerOptions> = {}): KvBlockManager {
  return new KvBlockManager({ blockSize: 4, numBlocks: 10, enablePrefixCaching: true, ...opts });
}

/** Looks up, then allocates the rest of the prompt; fails the test on null. */
function admit(m: KvBlockManager, id: string, tokens: number[]): { cached: number; fresh: readonly number[] } {
  const hit = m.getComputedBlocks(tokens);
  const fresh = m.allocateSlots(id, tokens, tokens.length - hit.numCachedTokens, hit.blockIds);
  if (fresh === null) throw new Error(`admit ${id}: no blocks`);
  m.checkInvariants();
  return { cached: hit.numCachedTokens, fresh };
}

describe("KvBlockManager: prefix cache", () => {
  it("reuses a freed request's full blocks for a request sharing its prefix", () => {
    const m = mgr();
    const a = range(10);
    expect(admit(m, "a", a).cached).toBe(0);
    const aBlocks = [...m.blocksOf("a")];
    expect(aBlocks).toHaveLength(3);
    m.free("a");
    m.checkInvariants();
    expect(m.numFreeBlocks()).toBe(10);

    const b = [...range(10), 100, 101];
    const hit = m.getComputedBlocks(b);
    expect(hit.blockIds).toEqual(aBlocks.slice(0, 2));
    expect(hit.numCachedTokens).toBe(8);
    expect(hit.fromTier).toEqual([]);
    const fresh = m.allocateSlots("b", b, 4, hit.blockIds);
    expect(fresh).toHaveLength(1);
    expect(m.blocksOf("b")).toEqual([...aBlocks.slice(0, 2), ...(fresh ?? [])]);
    expect(m.blockInfo(aBlocks[0] ?? -1)).toMatchObject({ refCount: 1, free: false });
    expect(m.stats()).toMatchObject({ queries: 22, hits: 8 });
    m.checkInvariants();
  });

  it("shares cached blocks between running requests (refCount 2) and frees them once both finish", () => {
    const m = mgr();
    admit(m, "a", range(9));
    const shared = m.blocksOf("a").slice(0, 2);
    const r = admit(m, "b", [...range(8), 50, 51]);
    expect(r.cached).toBe(8);
    expect(m.blocksOf("b").slice(0, 2)).toEqual(shared);
    expect(m.blockInfo(shared[0] ?? -1).refCount).toBe(2);
    m.free("a");
    expect(m.blockInfo(shared[0] ?? -1)).toMatchObject({ refCount: 1, free: false });
    m.free("b");
    expect(m.blockInfo(shared[0] ?? -1)).toMatchObject({ refCount: 0, free: true });
    m.checkInvariants();
  });

  it("never serves the whole prompt from cache: the last token is always computed", () => {
    const m = mgr();
    admit(m, "a", range(8));
    m.free("a");
    const hit = m.getComputedBlocks(range(8));
    expect(hit.numCachedTokens).toBe(4);
    expect(m.getComputedBlocks(range(9)).numCachedTokens).toBe(8);
    expect(m.getComputedBlocks([]).numCachedTokens).toBe(0);
  });

  it("hashes a partial block only once decoding fills it", () => {
    const m = mgr();
    const t = range(6);
    admit(m, "a", t);
    const [b0, b1] = m.blocksOf("a");
    expect(m.blockInfo(b0 ?? -1).hash).not.toBeNull();
    expect(m.blockInfo(b1 ?? -1).hash).toBeNull();
    t.push(6);
    expect(m.allocateSlots("a", t, 1)).toEqual([]);
    t.push(7);
    expect(m.allocateSlots("a", t, 1)).toEqual([]);
    expect(m.blockInfo(b1 ?? -1).tokenIds).toEqual([4, 5, 6, 7]);
    expect(m.blockPrefix(b1 ?? -1)).toEqual(range(8));
    t.push(8);
    expect(m.allocateSlots("a", t, 1)).toHaveLength(1);
    expect(m.numTokensOf("a")).toBe(9);
    m.checkInvariants();
  });

  it("does not match a prefix whose last block differs in one token", () => {
    const m = mgr();
    admit(m, "a", range(9));
    m.free("a");
    const t = range(9);
    t[5] = 99;
    expect(m.getComputedBlocks(t).numCachedTokens).toBe(4);
  });

  it("with prefix caching off, finds nothing and counts nothing", () => {
    const m = mgr({ enablePrefixCaching: false });
    admit(m, "a", range(9));
    m.free("a");
    expect(m.getComputedBlocks(range(9)).blockIds).toEqual([]);
    expect(m.numCachedBlocks()).toBe(0);
    expect(m.stats()).toMatchObject({ queries: 0, hits: 0 });
  });

  it("counts queries and hits in tokens", () => {
    const m = mgr();
    admit(m, "a", range(12));
    m.free("a");
    admit(m, "b", range(12));
    admit(m, "c", range(5, 1000));
    expect(m.stats()).toMatchObject({ queries: 29, hits: 8 });
  });
});

describe("KvBlockManager: repeated lookups of a waiting request (its hash chain)", () => {
  it("replays the last lookup only while its blocks hold the prefix, and finds blocks cached since", () => {
    const m = mgr({ numBlocks: 6 });
    const waiting = [...range(8), 99, 98]; // two full blocks shared with "a", then its own tokens
    const chain = new BlockHashChain();
    admit(m, "a", range(9));
    m.free("a");
    expect(m.getComputedBlocks(waiting, chain).blockIds).toEqual(m.getComputedBlocks(waiting).blockIds);
    expect(m.getComputedBlocks(waiting, chain).numCachedTokens).toBe(8);
    // "b" takes every block: a's cached blocks are evicted (and reused for other tokens).
    admit(m, "b", range(24, 100));
    expect(m.getComputedBlocks(waiting, chain).numCachedTokens).toBe(0);
    m.free("b");
    // "c" computes the shared prefix again: the same chain finds the new blocks.
    admit(m, "c", range(9));
    const hit = m.getComputedBlocks(waiting, chain);
    expect(hit.blockIds).toEqual(m.blocksOf("c").slice(0, 2));
    expect(m.allocateSlots("w", waiting, 2, hit.blockIds, chain)).toHaveLength(1);
    m.checkInvariants();
    // After a reset nothing is found, whatever the chain replayed before.
    m.resetPrefixCache();
    expect(m.getComputedBlocks(waiting, chain).numCachedTokens).toBe(0);
  });
});

describe("KvBlockManager: allocation and eviction", () => {
  it("evicts cached free blocks in LRU order, a request's tail blocks first", () => {
    const m = mgr({ blockSize: 2, numBlocks: 4 });
    admit(m, "a", [1, 2, 3, 4]);
    admit(m, "b", [5, 6, 7, 8]);
    const [a0, a1] = m.blocksOf("a");
    const [b0, b1] = m.blocksOf("b");
    m.free("a");
    m.free("b");
    expect(m.freeQueueOrder()).toEqual([a1, a0, b1, b0]);
    admit(m, "c", [9, 9]);
    expect(m.blocksOf("c")).toEqual([a1]);
    expect(m.stats().evictions).toBe(1);
    expect(m.getComputedBlocks([1, 2, 3, 4, 0]).numCachedTokens).toBe(2);
    expect(m.getComputedBlocks([5, 6, 7, 8, 0]).numCachedTokens).toBe(4);
    // A hit takes b's blocks out of the queue; freed again, they become most recently used.
    admit(m, "d", [5, 6, 7, 8, 0]);
    m.free("d");
    const order = m.freeQueueOrder();
    expect(order.indexOf(a0 ?? -1)).toBeLessThan(order.indexOf(b0 ?? -1));
    m.checkInvariants();
  });

  it("trimSlots gives back the slots of rejected draft positions, unhashed blocks to the front of the free queue", () => {
    const m = mgr({ blockSize: 4, numBlocks: 8 });
    const t = range(5);
    admit(m, "a", t);
    // A decode step verifying 6 draft tokens: slots for 5 + 1 + 6 = 12 tokens, 3 blocks.
    expect(m.allocateSlots("a", [...t, 50], 7)).toHaveLength(1);
    expect(m.numTokensOf("a")).toBe(12);
    const third = m.blocksOf("a")[2]!;
    // One draft token accepted: 7 tokens hold KV, 2 blocks.
    m.trimSlots("a", 7);
    expect(m.numTokensOf("a")).toBe(7);
    expect(m.blocksOf("a")).toHaveLength(2);
    expect(m.freeQueueOrder()[0]).toBe(third);
    expect(m.blockInfo(third)).toMatchObject({ refCount: 0, free: true, hash: null });
    m.trimSlots("a", 9); // more than it holds: nothing
    expect(m.numTokensOf("a")).toBe(7);
    expect(() => m.trimSlots("a", 0)).toThrow(/would drop hashed blocks/);
    m.checkInvariants();
  });

  it("touchRecords reads the named requests' records and changes nothing", () => {
    const m = mgr();
    admit(m, "a", range(10));
    admit(m, "b", range(5, 100));
    m.free("b");
    const before = { free: m.numFreeBlocks(), order: m.freeQueueOrder(), blocks: [...m.blocksOf("a")], stats: m.stats() };
    // Its sum covers known requests only (a: 10 tokens in 3 blocks); a freed or unknown id reads nothing.
    expect(m.touchRecords([{ requestId: "a" }, { requestId: "b" }, { requestId: "nobody" }])).toBe(13);
    expect(m.touchRecords([])).toBe(0);
    expect({ free: m.numFreeBlocks(), order: m.freeQueueOrder(), blocks: [...m.blocksOf("a")], stats: m.stats() }).toEqual(before);
    m.checkInvariants();
  });

  it("takes a request's handle for its record, and ignores a stale one, another request's and another manager's", () => {
    const m = mgr();
    admit(m, "a", range(6));
    admit(m, "b", range(5, 100));
    const a = m.handleOf("a");
    const b = m.handleOf("b");
    expect(a?.requestId).toBe("a");
    expect(m.handleOf("nobody")).toBeUndefined();
    // a grows from 6 to 9 tokens through its handle: a third block.
    expect(m.allocateSlots("a", range(9), 3, [], undefined, a)).toHaveLength(1);
    expect(m.numTokensOf("a")).toBe(9);
    // b's handle given for a: a's own record is used (one more token, no new block), b is untouched.
    expect(m.allocateSlots("a", range(10), 1, [], undefined, b)).toHaveLength(0);
    expect([m.numTokensOf("a"), m.numTokensOf("b")]).toEqual([10, 5]);
    expect(m.touchRecords([{ requestId: "a", kvHandle: a }, { requestId: "b", kvHandle: a }])).toBe(10 + 3 + 5 + 2);
    // Freed and admitted again: the old handle names nothing; the new record is used (a new request of 4 tokens).
    m.free("a");
    admit(m, "a", range(3, 200));
    expect(m.allocateSlots("a", range(4, 200), 1, [], undefined, a)).toHaveLength(0);
    expect(m.numTokensOf("a")).toBe(4);
    expect(m.touchRecords([{ requestId: "a", kvHandle: a }])).toBe(4 + 1);
    // Another manager's live record for the same id: ignored too.
    const other = mgr();
    admit(other, "a", range(8, 300));
    expect(m.allocateSlots("a", range(5, 200), 1, [], undefined, other.handleOf("a"))).toHaveLength(1);
    expect([m.numTokensOf("a"), other.numTokensOf("a")]).toEqual([5, 8]);
    m.checkInvariants();
    other.checkInvariants();
  });

  it("returns null and changes nothing when free blocks are short", () => {
    const m = mgr({ numBlocks: 4 });
    admit(m, "a", range(12));
    const before = JSON.stringify({ q: m.freeQueueOrder(), s: m.stats(), a: m.blocksOf("a"), u: m.usage() });
    expect(m.allocateSlots("b", range(8, 100), 8)).toBeNull();
    expect(m.blocksOf("b")).toEqual([]);
    expect(JSON.stringify({ q: m.freeQueueOrder(), s: m.stats(), a: m.blocksOf("a"), u: m.usage() })).toBe(before);
    expect(m.allocateSlots("b", range(4, 100), 4)).toHaveLength(1);
    expect(m.usage()).toBe(1);
    m.checkInvariants();
  });

  it("counts cached free hit blocks against the free pool when admitting", () => {
    const m = mgr({ numBlocks: 3 });
    admit(m, "a", range(9));
    m.free("a");
    admit(m, "x", range(4, 500)); // takes a's unhashed tail block
    const hit = m.getComputedBlocks([...range(8), 7, 7, 7, 7, 7]);
    expect(hit.blockIds).toHaveLength(2);
    // 2 cached free blocks + 1 new block needed, only 2 free: refused, hits stay cached.
    expect(m.allocateSlots("b", [...range(8), 7, 7, 7, 7, 7], 5, hit.blockIds)).toBeNull();
    expect(m.numFreeBlocks()).toBe(2);
    expect(m.getComputedBlocks(range(9)).numCachedTokens).toBe(8);
    m.checkInvariants();
  });

  it("rejects stale computed blocks and bad arguments with clear errors", () => {
    const m = mgr({ numBlocks: 2 });
    admit(m, "a", range(5));
    m.free("a");
    const hit = m.getComputedBlocks(range(5));
    admit(m, "x", range(8, 300)); // evicts the hit
    expect(() => m.allocateSlots("b", range(5), 1, hit.blockIds)).toThrow(/no longer holds tokens 0\.\.3/);
    expect(() => m.allocateSlots("b", range(5), -1)).toThrow(/numNewTokens/);
    expect(() => new KvBlockManager({ blockSize: 0, numBlocks: 1, enablePrefixCaching: true })).toThrow(/blockSize/);
    expect(
      () => new KvBlockManager({ blockSize: 4, numBlocks: 1, enablePrefixCaching: false, l2: new InProcessKvTier({ name: "L2", capacityBlocks: 1, bandwidthBytesPerMs: 1 }) }),
    ).toThrow(/enablePrefixCaching/);
  });

  it("resetPrefixCache drops cached blocks, and running requests register nothing more", () => {
    const m = mgr();
    admit(m, "a", range(9));
    admit(m, "b", range(9, 100));
    m.free("a");
    expect(m.numCachedBlocks()).toBe(4);
    expect(m.resetPrefixCache()).toBe(2);
    expect(m.numCachedBlocks()).toBe(0);
    expect(m.getComputedBlocks(range(9)).numCachedTokens).toBe(0);
    const t = range(9, 100);
    for (let i = 0; i < 4; i++) {
      t.push(i);
      m.allocateSlots("b", t, 1);
    }
    expect(m.numCachedBlocks()).toBe(0);
    m.checkInvariants();
  });

  it("keeps prefixes of different cache salts apart", () => {
    const m = mgr({ cacheSalt: "policy-v1" });
    admit(m, "a", range(9));
    m.free("a");
    expect(m.getComputedBlocks(range(9)).numCachedTokens).toBe(8);
    m.setCacheSalt("policy-v2");
    expect(m.getComputedBlocks(range(9)).numCachedTokens).toBe(0);
    m.setCacheSalt("policy-v1");
    expect(m.getComputedBlocks(range(9)).numCachedTokens).toBe(8);
  });
});

describe("KvBlockManager: hash collisions", () => {
  it("never reuses a colliding block whose tokens differ", () => {
    const sum = (t: readonly number[]): number => t.reduce((a, b) => a + b, 0);
    const m = mgr({ blockSize: 2, hashFn: (p, t) => `${p ?? ""}/${sum(t)}` });
    admit(m, "a", [1, 2, 5]);
    m.free("a");
    expect(m.getComputedBlocks([2, 1, 5]).numCachedTokens).toBe(0);
    expect(m.getComputedBlocks([1, 2, 5]).numCachedTokens).toBe(2);
  });

  it("never reuses a block whose own tokens match but whose prefix differs, even with a constant hash", () => {
    const m = mgr({ blockSize: 2, numBlocks: 6, hashFn: () => "h" });
    admit(m, "a", [1, 2, 3, 4, 0]);
    m.free("a");
    expect(m.getComputedBlocks([2, 1, 7]).numCachedTokens).toBe(0);
    admit(m, "c", [2, 1, 7]);
    m.free("c");
    // Block 1 of a holds [3, 4] but after [1, 2]: only c's first block may serve [2, 1, 3, 4, ...].
    const hit = m.getComputedBlocks([2, 1, 3, 4, 9]);
    expect(hit.numCachedTokens).toBe(2);
    expect(m.getComputedBlocks([1, 2, 3, 4, 9]).numCachedTokens).toBe(4);
    // Same tokens at another position: [1, 2, 1, 2] must not reuse block 0 as block 1.
    expect(m.getComputedBlocks([1, 2, 1, 2, 9]).numCachedTokens).toBe(2);
    m.checkInvariants();
  });
});

describe("KvBlockManager: hashes that share a map key", () => {
  it("finds each block under its own hash, in L1 and after both were evicted to L3", () => {
    // Blocks [1, 1] and [2, 2] hash to two strings with the same 30-bit key (hashKey).
    const hashFn = (p: string | null, t: readonly number[]): string => (t[0] === 1 ? "h398824" : t[0] === 2 ? "h768140" : `${p ?? ""}/${t.join(",")}`);
    expect(hashKey("h398824")).toBe(hashKey("h768140"));
    const l3 = new InProcessKvTier({ name: "L3", capacityBlocks: 16, bandwidthBytesPerMs: 1000 });
    const m = mgr({ blockSize: 2, numBlocks: 4, hashFn, l3 });
    admit(m, "a", [1, 1, 5]);
    admit(m, "b", [2, 2, 5]);
    const [a0, b0] = [m.blocksOf("a")[0], m.blocksOf("b")[0]];
    m.free("a");
    m.free("b");
    expect(m.getComputedBlocks([1, 1, 9]).blockIds).toEqual([a0]);
    expect(m.getComputedBlocks([2, 2, 9]).blockIds).toEqual([b0]);
    // A request of other blocks takes all four, evicting both to L3.
    admit(m, "c", [7, 7, 7, 7, 7, 7, 7]);
    m.free("c");
    expect([l3.get("h398824")?.tokenIds, l3.get("h768140")?.tokenIds]).toEqual([[1, 1], [2, 2]]);
    const hit = m.getComputedBlocks([2, 2, 9]);
    expect([hit.numCachedTokens, hit.fromTier]).toEqual([2, [{ tier: "L3", blocks: 1 }]]);
    expect(m.blockInfo(hit.blockIds[0] ?? -1).tokenIds).toEqual([2, 2]);
    expect(m.getComputedBlocks([1, 1, 9]).numCachedTokens).toBe(2);
    expect(m.getComputedBlocks([3, 3, 9]).numCachedTokens).toBe(0);
    m.checkInvariants();
  });
});

describe("KvBlockManager: tiers", () => {
  const tier = (name: "L2" | "L3", capacityBlocks = 16): InProcessKvTier =>
    new InProcessKvTier({ name, capacityBlocks, bandwidthBytesPerMs: 1000 });

  it("offloads evicted cached blocks to L2 and loads them back on a hit", () => {
    const l2 = tier("L2");
    const m = mgr({ blockSize: 2, numBlocks: 2, bytesPerToken: 100, l2 });
    admit(m, "a", [1, 2, 3]);
    m.free("a");
    admit(m, "b", [7, 8, 9]); // evicts a's hashed block 0
    expect(m.stats()).toMatchObject({ evictions: 1, offloadedBlocks: 1 });
    expect(l2.size()).toBe(1);
    expect(m.takeEvictionTransfers()).toEqual([{ from: "L1", to: "L2", blocks: 1, bytes: 200 }]);
    expect(m.takeEvictionTransfers()).toEqual([]);
    m.free("b");
    const hit = m.getComputedBlocks([1, 2, 3]);
    expect(hit.numCachedTokens).toBe(2);
    expect(hit.fromTier).toEqual([{ tier: "L2", blocks: 1 }]);
    expect(hit.loadedBlockIds).toEqual(hit.blockIds);
    expect(m.stats().loadedBlocks).toBe(1);
    expect(m.blockPrefix(hit.blockIds[0] ?? -1)).toEqual([1, 2]);
    expect(m.allocateSlots("c", [1, 2, 3], 1, hit.blockIds)).toHaveLength(1);
    m.checkInvariants();
  });

  it("loads missing blocks without evicting the L1 blocks of the same hit", () => {
    const l2 = tier("L2");
    const m = mgr({ blockSize: 2, numBlocks: 3, l2 });
    admit(m, "a", [1, 2, 3, 4, 5]);
    const [a0, a1, a2] = m.blocksOf("a");
    m.free("a"); // queue: a2 a1 a0
    admit(m, "b", [9, 9, 9]); // takes a2, a1 (a1 evicted to L2)
    m.free("b");
    expect(m.freeQueueOrder()[0]).toBe(a0);
    const hit = m.getComputedBlocks([1, 2, 3, 4, 5]);
    expect(hit.numCachedTokens).toBe(4);
    expect(hit.blockIds[0]).toBe(a0);
    expect(hit.loadedBlockIds).toHaveLength(1);
    expect([a1, a2]).toContain(hit.loadedBlockIds[0]);
    expect(m.allocateSlots("c", [1, 2, 3, 4, 5], 1, hit.blockIds)).toHaveLength(1);
    m.checkInvariants();
  });

  it("stops a tier hit where no free L1 block is left to load into", () => {
    const l2 = tier("L2");
    const m = mgr({ blockSize: 2, numBlocks: 3, l2 });
    admit(m, "a", [1, 2, 3, 4, 5]);
    m.free("a");
    admit(m, "b", [8, 8, 8, 8, 8, 8]); // both of a's full blocks go to L2
    expect(l2.size()).toBe(2);
    const hit = m.getComputedBlocks([1, 2, 3, 4, 5]);
    expect(hit.numCachedTokens).toBe(0);
    m.free("b");
    expect(m.getComputedBlocks([1, 2, 3, 4, 5]).fromTier).toEqual([{ tier: "L2", blocks: 2 }]);
  });

  it("shares one L3 between two managers: a prefix offloaded by A is found by B", () => {
    const l3 = tier("L3");
    const a = mgr({ l3, bytesPerToken: 10 });
    const b = mgr({ l3, bytesPerToken: 10 });
    const prompt = range(13);
    admit(a, "r1", prompt);
    expect(a.offloadRequest("r1", "L3")).toEqual({ from: "L1", to: "L3", blocks: 3, bytes: 120 });
    expect(a.blocksOf("r1")).toEqual([]);
    const hit = b.getComputedBlocks([...prompt, 77]);
    expect(hit.numCachedTokens).toBe(12);
    expect(hit.fromTier).toEqual([{ tier: "L3", blocks: 3 }]);
    expect(b.allocateSlots("r2", [...prompt, 77], 2, hit.blockIds)).toHaveLength(1);
    // B extends the chain; A then reuses B's extension through L3 on top of its own L1 blocks.
    const longer = [...prompt, 77, 78, 79, 80];
    b.allocateSlots("r2", longer, 3);
    expect(b.offloadRequest("r2", "L3")?.blocks).toBe(1);
    const hitA = a.getComputedBlocks([...longer, 1]);
    expect(hitA.numCachedTokens).toBe(16);
    expect(hitA.fromTier).toEqual([{ tier: "L3", blocks: 1 }]);
    a.checkInvariants();
    b.checkInvariants();
  });

  it("evicts to L3 when there is no L2", () => {
    const l3 = tier("L3");
    const m = mgr({ blockSize: 2, numBlocks: 2, l3 });
    admit(m, "a", [1, 2, 3]);
    m.free("a");
    admit(m, "b", [4, 4, 4]);
    expect(l3.size()).toBe(1);
    expect(m.takeEvictionTransfers()).toEqual([{ from: "L1", to: "L3", blocks: 1, bytes: 0 }]);
  });

  it("offloadRequest frees the blocks, demotes them to the queue head and skips blocks already offloaded", () => {
    const l2 = tier("L2");
    const m = mgr({ l2, bytesPerToken: 1 });
    expect(mgr().offloadRequest("x", "L2")).toBeNull();
    expect(m.offloadRequest("x", "L3")).toBeNull();
    expect(() => m.offloadRequest("nope", "L2")).toThrow(/holds no KV blocks/);
    const t = range(10);
    admit(m, "a", t);
    const [a0, a1, a2] = m.blocksOf("a");
    expect(m.offloadRequest("a", "L2")).toEqual({ from: "L1", to: "L2", blocks: 2, bytes: 8 });
    expect(m.freeQueueOrder().slice(0, 2)).toEqual([a1, a0]);
    expect(m.freeQueueOrder()).toContain(a2);
    expect(m.stats().offloadedBlocks).toBe(2);
    // Restored while still in L1: no transfer needed.
    const hit = m.getComputedBlocks([...t, 10]);
    expect(hit).toMatchObject({ numCachedTokens: 8, fromTier: [] });
    m.allocateSlots("a2", [...t, 10], 3, hit.blockIds);
    expect(m.offloadRequest("a2", "L2")?.blocks).toBe(0);
    expect(m.offloadPrefix([...t, 10], "L2")).toEqual({ from: "L1", to: "L2", blocks: 0, bytes: 0 });
    m.checkInvariants();
  });

  it("offloadPrefix moves a finished program's cached prefix to the tier", () => {
    const l2 = tier("L2");
    const m = mgr({ l2 });
    admit(m, "a", range(9));
    m.free("a");
    expect(m.offloadPrefix(range(9), "L2")?.blocks).toBe(2);
    expect(l2.size()).toBe(2);
  });
});
