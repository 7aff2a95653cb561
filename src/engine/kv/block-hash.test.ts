// Tests of chained block hashes and prefix verification.
import { describe, expect, it } from "vitest";
import { BlockHashChain, PrefixVerifier, hashBlockTokens, hashBlockTokensAt, hashKey, makeIdentity, packTokens, sameIdentity, samePackedAt, sliceTokens, unpackTokens, type KvBlockIdentity } from "./block-hash.js";

describe("hashBlockTokens", () => {
  it("is deterministic, chained, and sensitive to order, parent and extra keys", () => {
    const h0 = hashBlockTokens(null, [1, 2, 3, 4]);
    expect(h0).toMatch(/^[0-9a-f]{16}$/);
    expect(hashBlockTokens(null, [1, 2, 3, 4])).toBe(h0);
    expect(hashBlockTokens(null, [2, 1, 3, 4])).not.toBe(h0);
    expect(hashBlockTokens(h0, [1, 2, 3, 4])).not.toBe(h0);
    expect(hashBlockTokens(null, [1, 2, 3, 4], ["salt"])).not.toBe(h0);
    expect(hashBlockTokens(null, [1, 2, 3])).not.toBe(hashBlockTokens(null, [1, 2, 3, 0]));
    expect(hashBlockTokens(null, [2 ** 32 + 1])).not.toBe(hashBlockTokens(null, [1]));
  });

  it("keeps its keys across versions (engines sharing an L3 pool must agree)", () => {
    // Values of the implementation that built the key from two 8-digit hex strings.
    const a = hashBlockTokens(null, [1, 2, 3, 4]);
    const b = hashBlockTokens(a, [0, 5, 128255, 7], ["salt", 3]);
    expect([a, b, hashBlockTokens(b, [2 ** 33, 9])]).toEqual(["884eb0d25a88ca87", "bc07cd0c2648eec9", "6394122c9a6b1f2f"]);
  });

  it("reads a parent hash of another form as parseInt does: hex digits of either case, up to the first that is not", () => {
    const t = [1, 2, 3];
    expect(hashBlockTokens("884EB0D25A88CA87", t)).toBe(hashBlockTokens("884eb0d25a88ca87", t));
    // A lane read up to a non-digit ('12' of '12zz…'), or none at all (0), or a short hash.
    expect(hashBlockTokens("12zz3456ffffffff", t)).toBe(hashBlockTokens("00000012ffffffff", t));
    expect(hashBlockTokens("ffffffffsalt-abc", t)).toBe(hashBlockTokens("ffffffff00000000", t));
    expect(hashBlockTokens("abc", t)).toBe(hashBlockTokens("00000abc00000000", t));
    expect(hashBlockTokens("abc", t)).not.toBe(hashBlockTokens(null, t));
  });

  it("hashes a block in place as it hashes the block sliced out, and a chain with it as with any other function", () => {
    const tokens = [7, 2 ** 32 + 5, 0, 128_255, 3, 9, 1, 2, 65_535];
    for (const [off, len] of [[0, 3], [1, 4], [5, 4], [2, 0]] as const) {
      const parent = off === 0 ? null : hashBlockTokens(null, tokens.slice(0, off));
      expect(hashBlockTokensAt(parent, tokens, off, len)).toBe(hashBlockTokens(parent, tokens.slice(off, off + len)));
      expect(hashBlockTokensAt(parent, tokens, off, len, ["salt", 3])).toBe(hashBlockTokens(parent, tokens.slice(off, off + len), ["salt", 3]));
    }
    // The chain reads blocks in place for hashBlockTokens itself, and slices for another function: same hashes.
    const sliced = (parent: string | null, block: readonly number[]): string => hashBlockTokens(parent, block);
    const inPlace = new BlockHashChain();
    const other = new BlockHashChain();
    expect(inPlace.hashOf(tokens, 3, 2, null, hashBlockTokens)).toBe(other.hashOf(tokens, 3, 2, null, sliced));
    // A continuation goes on from the blocks it takes over (their lanes with them) as a fresh chain would.
    const longer = [...tokens, 4, 8, 15];
    const next = inPlace.continuedBy(longer);
    const fresh = new BlockHashChain();
    for (const i of [5, 4, 3, 0]) expect(next.hashOf(longer, i, 2, null, hashBlockTokens)).toBe(fresh.hashOf(longer, i, 2, null, hashBlockTokens));
    // Under a salt's root the first block starts from the root's hash.
    const root = makeIdentity(hashBlockTokens(null, [1], ["salt"]), [1], null);
    expect(new BlockHashChain().hashOf(tokens, 2, 2, root, hashBlockTokens)).toBe(other.hashOf(tokens, 2, 2, root, sliced));
  });

  it("spreads many small blocks without collisions", () => {
    const seen = new Set<string>();
    for (let a = 0; a < 64; a++) for (let b = 0; b < 64; b++) for (let c = 0; c < 4; c++) seen.add(hashBlockTokens(null, [a, b, c]));
    expect(seen.size).toBe(64 * 64 * 4);
  });
});

describe("PrefixVerifier", () => {
  it("accepts a chain built by another owner only when every ancestor matches", () => {
    const a0 = makeIdentity("x", [1, 2], null);
    const a1 = makeIdentity("y", [3, 4], a0);
    const b0 = makeIdentity("x", [1, 2], null); // same content, other object
    const c0 = makeIdentity("x", [9, 9], null);
    const c1 = makeIdentity("y", [3, 4], c0);
    expect(new PrefixVerifier().accept(a1, [3, 4], b0)).toBe(true);
    expect(new PrefixVerifier().accept(c1, [3, 4], b0)).toBe(false);
    expect(new PrefixVerifier().accept(a0, [1, 2], a0)).toBe(false); // wrong depth
    expect(sameIdentity(a1, makeIdentity("y", [3, 4], b0))).toBe(true);
    expect(sameIdentity(a1, c1)).toBe(false);
  });
});

describe("PrefixVerifier with a request's proofs", () => {
  it("records what it proves, parents included, and accepts a known identity again at its depth only", () => {
    const a0 = makeIdentity("x", [1, 2], null);
    const a1 = makeIdentity("y", [3, 4], a0);
    const b0 = makeIdentity("x", [1, 2], null); // same content as a0, another owner's object
    const tokens = [1, 2, 3, 4];
    const proofs = { known: [] as (KvBlockIdentity | undefined)[], knownAlso: new Set<KvBlockIdentity>() };
    expect(new PrefixVerifier(proofs).acceptAt(b0, tokens, 0, 2, null)).toBe(true);
    expect(new PrefixVerifier(proofs).acceptAt(a1, tokens, 2, 2, b0)).toBe(true);
    expect(proofs.known).toEqual([b0, a1]);
    // a1's parent a0 was proven on the way; it is kept beside b0, not in its place.
    expect([...proofs.knownAlso]).toEqual([a0]);
    const again = new PrefixVerifier(proofs);
    expect(again.acceptAt(a0, tokens, 0, 2, null)).toBe(true);
    expect(again.acceptAt(b0, tokens, 0, 2, null)).toBe(true);
    expect(again.acceptAt(a1, tokens, 2, 2, a0)).toBe(true);
    expect(again.acceptAt(a1, tokens, 0, 2, null)).toBe(false); // wrong depth, known or not
    const c1 = makeIdentity("y", [3, 4], makeIdentity("x", [9, 9], null));
    expect(again.acceptAt(c1, tokens, 2, 2, a0)).toBe(false); // not known, and its parent differs
    expect(proofs.known).toEqual([b0, a1]);
  });
});

describe("BlockHashChain", () => {
  it("gives the chained hashes of full blocks, computing each once as the tokens grow", () => {
    const calls: number[][] = [];
    const fn = (parent: string | null, tokens: readonly number[]): string => {
      calls.push([...tokens]);
      return hashBlockTokens(parent, tokens);
    };
    const chain = new BlockHashChain();
    const tokens = [1, 2, 3, 4, 5, 6];
    const h0 = hashBlockTokens(null, [1, 2]);
    const h2 = hashBlockTokens(hashBlockTokens(h0, [3, 4]), [5, 6]);
    expect(chain.hashOf(tokens, 2, 2, null, fn)).toBe(h2);
    expect(chain.hashOf(tokens, 0, 2, null, fn)).toBe(h0);
    tokens.push(7, 8);
    chain.hashOf(tokens, 3, 2, null, fn);
    expect(calls).toEqual([[1, 2], [3, 4], [5, 6], [7, 8]]);
    expect(() => chain.hashOf(tokens, 4, 2, null, fn)).toThrow(/block 4 is not full \(8 tokens\)/);
  });

  it("starts over under another root (cache salt)", () => {
    const chain = new BlockHashChain();
    const root = makeIdentity(hashBlockTokens(null, [], ["salt"]), [], null);
    const plain = chain.hashOf([1, 2], 0, 2, null, hashBlockTokens);
    expect(chain.hashOf([1, 2], 0, 2, root, hashBlockTokens)).toBe(hashBlockTokens(root.hash, [1, 2]));
    expect(chain.hashOf([1, 2], 0, 2, root, hashBlockTokens)).not.toBe(plain);
  });

  it("keeps each hashed block's key, carries the shared ones to a continuation, and drops them under another root", () => {
    const chain = new BlockHashChain();
    const tokens = [1, 2, 3, 4, 5];
    const h1 = chain.hashOf(tokens, 1, 2, null, hashBlockTokens);
    expect(chain.keyAt(0)).toBe(hashKey(chain.hashOf(tokens, 0, 2, null, hashBlockTokens)));
    expect(chain.keyAt(1)).toBe(hashKey(h1));
    expect(() => chain.keyAt(2)).toThrow(/block 2 is not hashed yet/);
    const next = chain.continuedBy([1, 2, 3, 9, 5, 6]);
    expect(next.keyAt(0)).toBe(chain.keyAt(0));
    expect(() => next.keyAt(1)).toThrow(/not hashed yet/); // block 1 differs: not carried over
    chain.useRoot(makeIdentity("s", [], null), hashBlockTokens);
    expect(() => chain.keyAt(0)).toThrow(/not hashed yet/);
  });

  it("hands every block to a continuation that shares them all, and is left as a new chain", () => {
    const buf = new Uint32Array(16);
    buf.set([1, 2, 3, 4, 5]);
    const chain = new BlockHashChain();
    const h1 = chain.hashOf(buf, 1, 2, null, hashBlockTokens);
    const h0 = chain.hashAt(0) as string;
    const proof = makeIdentity(h1, [3, 4], null);
    chain.known[1] = proof;
    // A view of the very buffer the chain hashed (a handed-over context): no tokens compared, both blocks carried.
    buf.set([6, 7], 5);
    const next = chain.continuedBy(buf.subarray(0, 7));
    expect([next.hashAt(0), next.keyAt(0), next.keyAt(1), next.known[1]]).toEqual([h0, hashKey(h0), hashKey(h1), proof]);
    expect(next.hashOf(buf, 2, 2, null, hashBlockTokens)).toBe(new BlockHashChain().hashOf(buf, 2, 2, null, hashBlockTokens));
    expect([chain.hashAt(0), chain.known]).toEqual([undefined, []]);
    expect(chain.continuedBy(buf.subarray(0, 7)).hashAt(0)).toBeUndefined();
    // Another buffer is compared: only the blocks both hold are carried, and the chain keeps its own.
    const other = new Uint32Array([1, 2, 9, 4, 5, 6]);
    const partial = next.continuedBy(other);
    expect([partial.hashAt(0), partial.hashAt(1)]).toEqual([next.hashAt(0), undefined]);
    expect(next.hashAt(2)).toBeDefined();
  });

  it("forgets its proven identities under another root", () => {
    const chain = new BlockHashChain();
    chain.useRoot(null, hashBlockTokens);
    chain.known[0] = makeIdentity("x", [1, 2], null);
    chain.knownAlso.add(makeIdentity("x", [1, 2], null));
    chain.useRoot(null, hashBlockTokens);
    expect(chain.known).toHaveLength(1);
    chain.useRoot(makeIdentity("s", [], null), hashBlockTokens);
    expect(chain.known).toHaveLength(0);
    expect(chain.knownAlso.size).toBe(0);
  });
});

describe("packed tokens", () => {
  const lists = [[], [0], [3, 4], [0xfffd, 0], [0xfffe], [0xffff, 1], [70_000, 2], [2 ** 32 - 1], [2 ** 32], [-1, 5], [1.5], [0, 0, 0]];

  it("round-trips every form (narrow, wide, text), and two lists pack alike iff they are equal", () => {
    for (const a of lists) {
      expect(unpackTokens(packTokens(a, 0, a.length))).toEqual(a);
      for (const b of lists) expect(packTokens(a, 0, a.length) === packTokens(b, 0, b.length)).toBe(JSON.stringify(a) === JSON.stringify(b));
    }
    // A vocabulary up to 65,534 tokens packs one unit per token; larger ids take two.
    expect(packTokens([1, 2, 0xfffd], 0, 3)).toHaveLength(3);
    expect(packTokens([1, 0xfffe], 0, 2)).toHaveLength(5);
  });

  it("compares a packed block with a window of tokens in place, lengths and forms included", () => {
    const p = (xs: number[]): string => packTokens(xs, 0, xs.length);
    expect(samePackedAt(p([3, 4]), [1, 2, 3, 4], 2, 2)).toBe(true);
    expect(samePackedAt(p([3, 5]), [1, 2, 3, 4], 2, 2)).toBe(false);
    expect(samePackedAt(p([3]), [1, 2, 3, 4], 2, 2)).toBe(false);
    expect(samePackedAt(p([4, 5]), [1, 2, 3, 4], 3, 2)).toBe(false);
    expect(samePackedAt(packTokens([9, 3, 4], 1, 2), [3, 4], 0, 2)).toBe(true);
    expect(samePackedAt(p([70_000, 1]), [0, 70_000, 1], 1, 2)).toBe(true);
    expect(samePackedAt(p([70_000, 1]), [0, 70_000, 2], 1, 2)).toBe(false);
    // A narrow block against a window holding a wide token, and a wide block the length of a narrow window.
    expect(samePackedAt(p([4464, 1]), [70_000, 1], 0, 2)).toBe(false);
    expect(samePackedAt(p([70_000]), [0xffff, 1, 4464], 0, 3)).toBe(false);
    // Every list against every window of every other list, compared in place: the same answer as comparing lists.
    for (const a of lists) {
      for (const b of lists) expect(samePackedAt(p(a), [7, ...b, 7], 1, b.length)).toBe(JSON.stringify(a) === JSON.stringify(b));
    }
  });

  it("an identity reads its tokens back, frozen", () => {
    const id = makeIdentity("h", [5, 70_000, 6], null);
    expect(id.tokenIds).toEqual([5, 70_000, 6]);
    expect(Object.isFrozen(id.tokenIds)).toBe(true);
  });
});

describe("sameIdentity", () => {
  /** A chain of `n` blocks of two tokens each, the last block's tokens given, built as one owner would. */
  const chain = (n: number, last: readonly number[] = [n, n]): KvBlockIdentity => {
    let id: KvBlockIdentity | null = null;
    for (let d = 0; d < n; d++) id = makeIdentity(`h${d}`, d === n - 1 ? last : [d, d], id);
    return id as KvBlockIdentity;
  };

  it("keeps answering exactly after proofs: equal chains at every depth, and a child that differs", () => {
    const a = chain(50);
    const b = chain(50);
    // Deepest first, as evictions go: each check after the first stops at a pair proven by an earlier one.
    for (let x: KvBlockIdentity | null = a, y: KvBlockIdentity | null = b; x !== null && y !== null; x = x.parent, y = y.parent) {
      expect(sameIdentity(x, y)).toBe(true);
      expect(sameIdentity(y, x)).toBe(true);
    }
    // A child of a proven pair with other tokens, or under a parent that differs, is still told apart.
    const pa = a.parent as KvBlockIdentity;
    const pb = b.parent as KvBlockIdentity;
    expect(sameIdentity(makeIdentity("h50", [50, 50], pa), makeIdentity("h50", [50, 49], pb))).toBe(false);
    expect(sameIdentity(a, chain(50, [7, 7]))).toBe(false);
    // Same tokens as `a`, but its parent's differ (the grandparent is proven equal to b's).
    const forked = makeIdentity("h49", a.tokenIds, makeIdentity("h48", [0, 1], pa.parent));
    expect(sameIdentity(a, forked)).toBe(false);
    expect(sameIdentity(forked, b)).toBe(false);
    expect(sameIdentity(a, null)).toBe(false);
    expect(sameIdentity(null, null)).toBe(true);
  });
});

describe("sliceTokens", () => {
  it("copies a range of an array or a typed array into a plain array", () => {
    expect(sliceTokens(new Uint32Array([1, 2, 3, 4]), 1, 3)).toEqual([2, 3]);
    expect(sliceTokens([5, 2 ** 33, 7], 0, 2)).toEqual([5, 2 ** 33]);
    expect(sliceTokens(new Uint32Array([1]), 1, 1)).toEqual([]);
  });
});
