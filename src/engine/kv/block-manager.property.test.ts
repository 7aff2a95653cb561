// Property tests of the KV block manager over random operation sequences (fast-check): the pool's
// invariants hold after every operation and a cached prefix is only ever reused for the same tokens,
// with the default hash and with an injected weak hash that collides all the time.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KvBlockManager } from "./block-manager.js";
import { BlockHashChain, type KvHashFn } from "./block-hash.js";
import { InProcessKvTier } from "./tier.js";

type Op =
  | { kind: "admit"; r: number; base: number; baseLen: number; suffix: number[]; edit: Edit; turn: number | undefined; chunk: number }
  | { kind: "prefill"; r: number; chunk: number }
  | { kind: "decode"; r: number; tok: number }
  | { kind: "free"; r: number }
  | { kind: "offload"; r: number; to: "L2" | "L3" }
  | { kind: "lookup"; base: number; baseLen: number; suffix: number[]; edit: Edit }
  | { kind: "reset" };

/** Optional one-token edit of a prompt: same later blocks after a different earlier block. */
type Edit = { at: number; to: number } | undefined;

const tok = fc.integer({ min: 0, max: 3 });
const editArb: fc.Arbitrary<Edit> = fc.option(fc.record({ at: fc.nat(12), to: tok }), { nil: undefined, freq: 2 });
const opsArb = (freeWeight: number): fc.Arbitrary<Op> => fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant("admit" as const), r: fc.nat(5), base: fc.nat(2), baseLen: fc.nat(14), suffix: fc.array(tok, { maxLength: 5 }), edit: editArb, turn: fc.option(fc.nat(7), { nil: undefined }), chunk: fc.integer({ min: 1, max: 16 }) }), weight: 5 },
  { arbitrary: fc.record({ kind: fc.constant("prefill" as const), r: fc.nat(5), chunk: fc.integer({ min: 1, max: 8 }) }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant("decode" as const), r: fc.nat(5), tok }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant("free" as const), r: fc.nat(5) }), weight: freeWeight },
  { arbitrary: fc.record({ kind: fc.constant("offload" as const), r: fc.nat(5), to: fc.constantFrom("L2" as const, "L3" as const) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant("lookup" as const), base: fc.nat(2), baseLen: fc.nat(14), suffix: fc.array(tok, { maxLength: 5 }), edit: editArb }), weight: 3 },
  { arbitrary: fc.constant({ kind: "reset" as const }), weight: 1 },
);

const scenario = (maxBlocks: number, tiers: boolean) =>
  fc.record({
    blockSize: fc.integer({ min: 1, max: 5 }),
    numBlocks: fc.integer({ min: tiers ? 2 : 1, max: maxBlocks }),
    caching: fc.constantFrom(true, true, true, false),
    l2: tiers ? fc.integer({ min: 1, max: 8 }) : fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined, freq: 3 }),
    l3: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
    bases: fc.array(fc.array(tok, { minLength: 4, maxLength: 14 }), { minLength: 3, maxLength: 3 }),
    ops: fc.array(opsArb(tiers ? 8 : 3), { minLength: 5, maxLength: 60, size: "max" }),
  });
const scenarioArb = scenario(16, false);

/** Collides constantly: only the parity of the block's token sum, whatever the parent. */
const weakHash: KvHashFn = (_parent, tokens) => `${tokens.reduce((a, b) => a + b, 0) % 2}`;

interface Running {
  tokens: number[];
}

/** How often the runs exercised L1 reuse and tier loads (checked so the properties are not vacuous). */
const counts = { hits: 0, loads: 0 };

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

function runScenario(s: Scenario, hashFn: KvHashFn | undefined): void {
  const caching = s.caching || s.l2 !== undefined || s.l3 !== undefined;
  const tier = (name: "L2" | "L3", cap: number | undefined): InProcessKvTier | undefined =>
    cap === undefined ? undefined : new InProcessKvTier({ name, capacityBlocks: cap, bandwidthBytesPerMs: 1 });
  const m = new KvBlockManager({
    blockSize: s.blockSize,
    numBlocks: s.numBlocks,
    enablePrefixCaching: caching,
    bytesPerToken: 2,
    l2: tier("L2", s.l2),
    l3: tier("L3", s.l3),
    ...(hashFn ? { hashFn } : {}),
  });
  const bs = s.blockSize;
  const events = counts;
  const running = new Map<string, Running>();
  const history: number[][] = [];
  /** Last prefix each physical block was filled with (what its KV really holds). */
  const shadow = new Map<number, string>();
  const key = (t: readonly number[]): string => t.join(",");
  const prompt = (base: number, baseLen: number, suffix: number[], edit: Edit): number[] => {
    const t = [...(s.bases[base] ?? []).slice(0, baseLen), ...suffix];
    if (edit !== undefined && edit.at < t.length) t[edit.at] = edit.to;
    return t.length > 0 ? t : [0];
  };
  const snapshot = (): string =>
    JSON.stringify({ q: m.freeQueueOrder(), b: Array.from({ length: s.numBlocks }, (_, i) => m.blockInfo(i)), s: m.stats() });

  /** One hash chain per prompt, as a waiting request keeps its own: repeated lookups replay the last one. */
  const chains = new Map<string, BlockHashChain>();
  const looked: number[][] = [];
  const lookup = (tokens: number[]): ReturnType<KvBlockManager["getComputedBlocks"]> => {
    let chain = chains.get(key(tokens));
    if (chain === undefined) chains.set(key(tokens), (chain = new BlockHashChain()));
    // Without tiers a lookup changes nothing but counters: the replayed lookup must equal a fresh one.
    const fresh = s.l2 === undefined && s.l3 === undefined ? m.getComputedBlocks(tokens).blockIds : undefined;
    const before = m.stats();
    const hit = m.getComputedBlocks(tokens, chain);
    if (fresh !== undefined) expect(hit.blockIds).toEqual(fresh);
    expect(hit.numCachedTokens % bs).toBe(0);
    expect(hit.numCachedTokens).toBe(hit.blockIds.length * bs);
    expect(hit.numCachedTokens).toBeLessThan(Math.max(tokens.length, 1));
    if (!caching) expect(hit.blockIds).toEqual([]);
    expect(new Set(hit.blockIds).size).toBe(hit.blockIds.length);
    const loaded = new Set(hit.loadedBlockIds);
    for (const b of hit.loadedBlockIds) expect(hit.blockIds).toContain(b);
    events.hits += hit.blockIds.length - loaded.size;
    events.loads += loaded.size;
    hit.blockIds.forEach((b, i) => {
      const want = key(tokens.slice(0, (i + 1) * bs));
      // Reused L1 blocks really hold this prefix; loaded ones carry an identity for exactly it.
      if (!loaded.has(b)) expect(shadow.get(b), `block ${b} reused at #${i}`).toBe(want);
      expect(key(m.blockPrefix(b) ?? [])).toBe(want);
      shadow.set(b, want);
    });
    const after = m.stats();
    expect(after.loadedBlocks - before.loadedBlocks).toBe(hit.loadedBlockIds.length);
    expect(hit.fromTier.reduce((a, t) => a + t.blocks, 0)).toBe(hit.loadedBlockIds.length);
    return hit;
  };

  const allocate = (id: string, tokens: number[], n: number, computed: readonly number[] = []): boolean => {
    const before = snapshot();
    const fresh = m.allocateSlots(id, tokens, n, computed);
    if (fresh === null) {
      expect(snapshot()).toBe(before);
      return false;
    }
    for (const b of fresh) shadow.delete(b);
    const held = m.blocksOf(id);
    const full = Math.floor(Math.min(m.numTokensOf(id), tokens.length) / bs);
    for (let i = 0; i < full; i++) shadow.set(held[i] ?? -1, key(tokens.slice(0, (i + 1) * bs)));
    return true;
  };

  for (const op of s.ops) {
    const id = "r" + ("r" in op ? op.r : 0);
    const req = running.get(id);
    switch (op.kind) {
      case "admit": {
        if (req) break;
        // A program's next turn: an earlier request's tokens plus new ones (the agentic pattern).
        const prev = op.turn === undefined || history.length === 0 ? undefined : history[op.turn % history.length];
        const tokens = prev ? [...prev, ...op.suffix, 1] : prompt(op.base, op.baseLen, op.suffix, op.edit);
        const hit = lookup(tokens);
        const n = Math.min(op.chunk, tokens.length - hit.numCachedTokens);
        if (allocate(id, tokens, n, hit.blockIds)) running.set(id, { tokens });
        break;
      }
      case "prefill": {
        if (!req) break;
        const left = req.tokens.length - m.numTokensOf(id);
        if (left > 0) allocate(id, req.tokens, Math.min(op.chunk, left));
        break;
      }
      case "decode": {
        if (!req || m.numTokensOf(id) < req.tokens.length) break;
        req.tokens.push(op.tok);
        if (!allocate(id, req.tokens, 1)) req.tokens.pop();
        break;
      }
      case "free":
        if (req) history.push(req.tokens);
        m.free(id);
        running.delete(id);
        break;
      case "offload": {
        if (!req) break;
        const t = m.offloadRequest(id, op.to);
        if (t !== null) {
          expect(t.bytes).toBe(t.blocks * bs * 2);
          running.delete(id);
          history.push(req.tokens);
        }
        break;
      }
      case "lookup": {
        // Also look up an earlier prompt again, as a waiting request is every step (its chain replays).
        const again = looked[op.baseLen % Math.max(1, looked.length)];
        if (again !== undefined) lookup(again);
        const tokens = prompt(op.base, op.baseLen, op.suffix, op.edit);
        looked.push(tokens);
        lookup(tokens);
        break;
      }
      case "reset":
        m.resetPrefixCache();
        break;
    }
    m.checkInvariants();
    expect(m.usage()).toBeGreaterThanOrEqual(0);
    expect(m.usage()).toBeLessThanOrEqual(1);
    const st = m.stats();
    expect(st.hits).toBeLessThanOrEqual(st.queries);
    for (const [rid, r] of running) {
      expect(m.blocksOf(rid)).toHaveLength(Math.ceil(m.numTokensOf(rid) / bs));
      expect(m.numTokensOf(rid)).toBeLessThanOrEqual(r.tokens.length);
    }
    for (const t of m.takeEvictionTransfers()) expect(t.bytes).toBe(t.blocks * bs * 2);
  }
  for (const rid of running.keys()) m.free(rid);
  m.checkInvariants();
  expect(m.numFreeBlocks()).toBe(s.numBlocks);
  expect(m.usage()).toBe(0);
}

describe("KvBlockManager properties", () => {
  it("keeps its invariants and reuses only matching prefixes (default hash)", () => {
    counts.hits = counts.loads = 0;
    fc.assert(fc.property(scenarioArb, (s) => runScenario(s, undefined)), { numRuns: 100, seed: 20250101 });
    expect(counts.hits).toBeGreaterThan(200);
  });

  it("stays collision-safe with a weak hash that collides constantly", () => {
    counts.hits = counts.loads = 0;
    fc.assert(fc.property(scenarioArb, (s) => runScenario(s, weakHash)), { numRuns: 100, seed: 7 });
    expect(counts.hits).toBeGreaterThan(200);
  });

  it("keeps them under memory pressure with an L2 tier, with either hash", () => {
    counts.hits = counts.loads = 0;
    const arb = fc.record({ s: scenario(6, true), weak: fc.boolean() });
    fc.assert(fc.property(arb, ({ s, weak }) => runScenario(s, weak ? weakHash : undefined)), { numRuns: 100, seed: 11 });
    expect(counts.loads).toBeGreaterThanOrEqual(5);
  });
});
