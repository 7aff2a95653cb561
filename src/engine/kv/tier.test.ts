// Tests of the in-process KV tier (LRU by blocks) and transfer timing.
import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { hashKey, makeIdentity, TIER_SLOT, type KvBlockIdentity } from "./block-hash.js";
import { InProcessKvTier, transferMs } from "./tier.js";

/** A block as a tier stores it: its identity (null parent: the first block of a prefix). */
const block = (hash: string, tokenIds: number[], parent: KvBlockIdentity | null = null): KvBlockIdentity => makeIdentity(hash, tokenIds, parent);

describe("InProcessKvTier", () => {
  it("evicts the least recently used entry when full; use and put refresh", () => {
    const t = new InProcessKvTier({ name: "L2", capacityBlocks: 2, bandwidthBytesPerMs: 10 });
    expect(t.put(block("a", [1]))).toBe(true);
    expect(t.put(block("b", [2]))).toBe(true);
    expect(t.use(t.get("a") as KvBlockIdentity)).toBe(true);
    expect(t.put(block("c", [3]))).toBe(true);
    expect(t.has("b")).toBe(false);
    expect(t.lruOrder()).toEqual(["a", "c"]);
    expect(t.put(block("a", [1]))).toBe(true);
    expect(t.lruOrder()).toEqual(["c", "a"]);
    expect(t.evictions()).toBe(1);
    // A use of an equal identity (another object, after another lookup, so the cache of the last hash does not answer).
    t.has("zz");
    expect(t.use(block("c", [3]))).toBe(true);
    expect(t.lruOrder()).toEqual(["a", "c"]);
    t.remove("c");
    expect(t.size()).toBe(1);
  });

  it("stores the block (its parent chain with it) and refuses puts when it has no capacity", () => {
    const t = new InProcessKvTier({ name: "L3", capacityBlocks: 4, bandwidthBytesPerMs: 10 });
    const p = makeIdentity("p", [1, 2], null);
    t.put(block("c", [3, 4], p));
    expect(t.get("c")).toMatchObject({ tokenIds: [3, 4], parent: p, depth: 1 });
    // The identity itself, not a copy: L1 and the tiers share one object per block.
    const c = block("d", [5, 6], p);
    t.put(c);
    expect(t.get("d")).toBe(c);
    // With the caller's key (an identity's own): the same answer, held or not (after another lookup, so the
    // one-entry cache of the last hash does not answer).
    t.get("p");
    expect(t.get("d", c.key)).toBe(c);
    expect(t.get("q", makeIdentity("q", [], null).key)).toBeUndefined();
    const z = new InProcessKvTier({ name: "L3", capacityBlocks: 0, bandwidthBytesPerMs: 10 });
    expect(z.put(block("a", [1]))).toBe(false);
    expect(z.size()).toBe(0);
  });

  // Filled at once (16 of 24 hashes), and filled late: the hashes grow from 8 to 1,007 over the run, so the first
  // eviction comes after thousands of uses, drops and slot reuses kept as last-use stamps, and must see their order.
  it.each([
    { capacity: 16, hashes: (): number => 24 },
    { capacity: 600, hashes: (i: number): number => 8 + Math.floor(i / 20) },
  ])("keeps LRU order over many uses as a re-inserting map would, bumping changeSeq only on drops and replacements (capacity $capacity)", ({ capacity, hashes }) => {
    // Reference: a Map whose insertion order is the LRU order (use = delete + set).
    const ref = new Map<string, number>();
    const t = new InProcessKvTier({ name: "L3", capacityBlocks: capacity, bandwidthBytesPerMs: 1 });
    const rng = new Rng(18);
    let refEvictions = 0;
    let refChanges = 0;
    for (let i = 0; i < 20_000; i++) {
      const hash = `h${rng.int(0, hashes(i) - 1)}`;
      const op = rng.int(0, 9);
      if (op < 6) {
        // Uses dominate: enough of them to compact the use list many times over.
        const held = t.get(hash);
        expect(held === undefined ? false : t.use(held)).toBe(ref.has(hash));
        const v = ref.get(hash);
        if (v !== undefined) {
          ref.delete(hash);
          ref.set(hash, v);
        }
      } else if (op < 9) {
        t.put(block(hash, [i]));
        if (ref.has(hash)) {
          ref.delete(hash);
          refChanges++;
        } else if (ref.size >= capacity) {
          ref.delete(ref.keys().next().value as string);
          refEvictions++;
          refChanges++;
        }
        ref.set(hash, i);
      } else {
        t.remove(hash);
        if (ref.delete(hash)) refChanges++;
      }
      if (i % 997 === 0) expect(t.lruOrder()).toEqual([...ref.keys()]);
    }
    expect(t.lruOrder()).toEqual([...ref.keys()]);
    expect([...ref].every(([h, v]) => t.get(h)?.tokenIds[0] === v)).toBe(true);
    expect(t.evictions()).toBe(refEvictions);
    expect(t.changeSeq).toBe(refChanges);
    expect(refEvictions).toBeGreaterThan(100);
  });

  it("a put of the block it holds (same tokens, same prefix) is a use: the entry and changeSeq stay", () => {
    const t = new InProcessKvTier({ name: "L3", capacityBlocks: 4, bandwidthBytesPerMs: 1 });
    const root = makeIdentity("r", [1, 2], null);
    t.put(block("a", [3, 4], root));
    t.put(block("b", [5], null));
    const held = t.get("a");
    // The same block again, its prefix an equal identity of another object: kept, moved to most recent.
    expect(t.put(block("a", [3, 4], makeIdentity("r", [1, 2], null)))).toBe(true);
    expect(t.get("a")).toBe(held);
    expect(t.changeSeq).toBe(0);
    expect(t.lruOrder()).toEqual(["b", "a"]);
    // Other tokens, or another prefix, under the same hash (a collision): replaced, changeSeq bumped.
    t.put(block("a", [3, 9], root));
    expect(t.get("a")?.tokenIds).toEqual([3, 9]);
    expect(t.changeSeq).toBe(1);
    t.put(block("a", [3, 9], makeIdentity("r", [1, 7], null)));
    expect(t.get("a")?.parent?.tokenIds).toEqual([1, 7]);
    expect(t.changeSeq).toBe(2);
  });

  it("use: true for a held block (the same object or an equal identity), marking it most recently used; false otherwise", () => {
    const t = new InProcessKvTier({ name: "L3", capacityBlocks: 8, bandwidthBytesPerMs: 1 });
    const a = block("a", [1]);
    const b = block("b", [2]);
    t.put(a);
    t.put(b);
    expect(t.use(a)).toBe(true);
    expect(t.lruOrder()).toEqual(["b", "a"]);
    // An equal identity of another object (never stored itself): found by its hash.
    expect(t.use(block("b", [2]))).toBe(true);
    expect(t.lruOrder()).toEqual(["a", "b"]);
    // Same hash, other tokens or another prefix: not this block, and no use.
    expect(t.use(block("a", [9]))).toBe(false);
    expect(t.use(block("a", [1], block("r", [0])))).toBe(false);
    expect(t.lruOrder()).toEqual(["a", "b"]);
    // Dropped, its slot reused by another block: the identity's remembered slot no longer answers.
    t.remove("a");
    const c = block("c", [3]);
    t.put(c);
    expect(t.use(a)).toBe(false);
    expect(t.use(c)).toBe(true);
    // Stored by another tier since (which remembers its own slot on the identity): still held here.
    const other = new InProcessKvTier({ name: "L2", capacityBlocks: 8, bandwidthBytesPerMs: 1 });
    other.put(block("x", [7]));
    other.put(block("y", [8]));
    other.put(b); // its third slot, where t holds nothing
    expect(t.use(b)).toBe(true);
    expect(other.use(b)).toBe(true);
    expect(other.use(c)).toBe(false);
  });

  it("get with a likely identity answers as without it: the held entry under the hash, or none", () => {
    const t = new InProcessKvTier({ name: "L3", capacityBlocks: 8, bandwidthBytesPerMs: 1 });
    const a = block("a", [1]);
    const b = block("b", [2]);
    t.put(a);
    t.put(b);
    expect(t.get("a", a.key, a)).toBe(a);
    // Another hash's identity, an equal identity never stored, one of the same hash with other tokens: the entry held.
    expect(t.get("a", a.key, b)).toBe(a);
    expect(t.get("b", b.key, block("b", [2]))).toBe(b);
    expect(t.get("a", a.key, block("a", [9]))).toBe(a);
    // Dropped, its slot reused by another block: nothing under its hash, whatever the slot noted on it holds now.
    t.remove("a");
    const c = block("c", [3]);
    t.put(c);
    expect(t.get("a", a.key, a)).toBeUndefined();
    expect(t.get("c", c.key, a)).toBe(c);
    // Stored by another tier since, at a slot where this tier holds another block: still found here by its hash.
    const other = new InProcessKvTier({ name: "L2", capacityBlocks: 8, bandwidthBytesPerMs: 1 });
    other.put(b);
    expect(b[TIER_SLOT]).toBe(c[TIER_SLOT]);
    expect(t.get("b", b.key, b)).toBe(b);
    expect(other.get("b", b.key, b)).toBe(b);
    expect(other.get("c", c.key, c)).toBeUndefined();
  });

  it("keeps distinct hashes that share a map key apart, through puts, uses, removals and LRU evictions", () => {
    // Two hashes whose 30-bit keys are equal (hashKey): the tier chains them under one key.
    const [x, y] = ["h398824", "h768140"];
    expect(hashKey(x)).toBe(hashKey(y));
    const t = new InProcessKvTier({ name: "L3", capacityBlocks: 2, bandwidthBytesPerMs: 1 });
    t.put(block(x, [1]));
    t.put(block(y, [2]));
    expect([t.get(x)?.tokenIds, t.get(y)?.tokenIds]).toEqual([[1], [2]]);
    // The least recently used (x, second in its key's chain) goes for a third block; y stays.
    t.put(block("z", [3]));
    expect([t.has(x), t.get(y)?.tokenIds, t.size()]).toEqual([false, [2], 2]);
    // x again evicts y (now the least recently used, first in the chain).
    t.put(block(x, [4]));
    expect([t.get(x)?.tokenIds, t.has(y), t.lruOrder()]).toEqual([[4], false, ["z", x]]);
    // y again evicts z; then x goes by removal, leaving y alone under the key.
    t.put(block(y, [5]));
    t.remove(x);
    expect([t.has(x), t.get(y)?.tokenIds, t.lruOrder()]).toEqual([false, [5], [y]]);
  });

  it("validates its options and times transfers by bandwidth", () => {
    expect(() => new InProcessKvTier({ name: "L2", capacityBlocks: -1, bandwidthBytesPerMs: 1 })).toThrow(/capacityBlocks/);
    expect(() => new InProcessKvTier({ name: "L2", capacityBlocks: 1, bandwidthBytesPerMs: 0 })).toThrow(/bandwidthBytesPerMs/);
    const t = new InProcessKvTier({ name: "L2", capacityBlocks: 1, bandwidthBytesPerMs: 25e6 });
    expect(transferMs(t, 50e6)).toBe(2);
    expect(transferMs(t, 0)).toBe(0);
    expect(() => transferMs(t, -1)).toThrow(/bytes/);
  });
});
