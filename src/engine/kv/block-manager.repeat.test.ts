// A request's repeated prefix lookups take shortcuts (the lookup memo, the repeatable lookup answered
// without a search, tier hits replayed, a continuation's hash chain carried over): they must give exactly
// what a lookup from scratch gives. Two identical clusters (two managers sharing one L3) run the same random
// operations, one the way the scheduler does (one hash chain per request, kept while it waits, runs and is
// continued), the other with a fresh chain at every call (no memo, no proofs, nothing repeatable); every
// lookup, allocation, free queue, tier order and counter must agree.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KvBlockManager, type ComputedBlocks } from "./block-manager.js";
import { BlockHashChain } from "./block-hash.js";
import { InProcessKvTier } from "./tier.js";

type Op =
  | { kind: "attempt"; r: number; m: number; budget: number }
  | { kind: "decode"; r: number; tok: number }
  | { kind: "finish"; r: number; suffix: number[] }
  | { kind: "fill"; m: number; len: number };

const tok = fc.integer({ min: 0, max: 2 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  // Attempts dominate: a waiting request is tried again and again, mostly with nothing changed.
  { arbitrary: fc.record({ kind: fc.constant("attempt" as const), r: fc.nat(4), m: fc.nat(1), budget: fc.integer({ min: 1, max: 12 }) }), weight: 8 },
  { arbitrary: fc.record({ kind: fc.constant("decode" as const), r: fc.nat(4), tok }), weight: 6 },
  { arbitrary: fc.record({ kind: fc.constant("finish" as const), r: fc.nat(4), suffix: fc.array(tok, { minLength: 1, maxLength: 6 }) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant("fill" as const), m: fc.nat(1), len: fc.integer({ min: 1, max: 30 }) }), weight: 1 },
);
const scenarioArb = fc.record({
  blockSize: fc.integer({ min: 1, max: 4 }),
  numBlocks: fc.integer({ min: 6, max: 14 }),
  l3: fc.integer({ min: 1, max: 24 }),
  // Samples of one prompt share its blocks: one computes what another waits for (its hits grow).
  bases: fc.array(fc.array(tok, { minLength: 4, maxLength: 24 }), { minLength: 2, maxLength: 2 }),
  suffixes: fc.array(fc.array(tok, { maxLength: 4 }), { minLength: 5, maxLength: 5 }),
  ops: fc.array(opArb, { minLength: 10, maxLength: 120, size: "max" }),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

/** One request's state on one side: where it is, its tokens, its chain (the memoising side's). */
interface Req {
  id: string;
  tokens: number[];
  on: number | undefined;
  chain: BlockHashChain;
}

/** What the repeated and the fresh side each observed, in order. */
type Trace = unknown[];

/** Coverage of the shortcuts, so the property is not vacuous. */
const seen = { repeated: 0, tierHits: 0, continued: 0 };

function run(s: Scenario, memoising: boolean): Trace {
  const l3 = new InProcessKvTier({ name: "L3", capacityBlocks: s.l3, bandwidthBytesPerMs: 1 });
  const managers = [0, 1].map(() => new KvBlockManager({ blockSize: s.blockSize, numBlocks: s.numBlocks, enablePrefixCaching: true, bytesPerToken: 2, l3 }));
  const chainOf = (r: Req): BlockHashChain => (memoising ? r.chain : new BlockHashChain());
  let seq = 0;
  const reqs: Req[] = s.suffixes.map((x, i) => ({ id: `r${seq++}`, tokens: [...(s.bases[i % 2] as number[]), ...x, 1], on: undefined, chain: new BlockHashChain() }));
  const trace: Trace = [];
  const lookups = new Map<string, ComputedBlocks>();
  for (const op of s.ops) {
    const r = reqs[op.kind === "fill" ? 0 : op.r] as Req;
    if (op.kind === "attempt" && r.on === undefined) {
      const m = managers[op.m] as KvBlockManager;
      const chain = chainOf(r);
      const hit = m.getComputedBlocks(r.tokens, chain);
      const before = lookups.get(r.id);
      if (before !== undefined && before.blockIds === hit.blockIds) seen.repeated++;
      lookups.set(r.id, hit);
      const n = Math.min(r.tokens.length - hit.numCachedTokens, op.budget);
      const fresh = m.allocateSlots(r.id, r.tokens, n, hit.blockIds, chain);
      if (fresh !== null) r.on = op.m;
      trace.push(["attempt", r.id, [...hit.blockIds], hit.numCachedTokens, hit.fromTier, hit.loadedBlockIds, fresh]);
    } else if (op.kind === "decode" && r.on !== undefined) {
      const m = managers[r.on] as KvBlockManager;
      const held = m.numTokensOf(r.id);
      // Catch up with the tokens first (a chunked prefill), then sample one more.
      if (held < r.tokens.length) trace.push(["prefill", r.id, m.allocateSlots(r.id, r.tokens, r.tokens.length - held, [], chainOf(r))]);
      else {
        r.tokens.push(op.tok);
        trace.push(["decode", r.id, m.allocateSlots(r.id, r.tokens, 1, [], chainOf(r))]);
      }
    } else if (op.kind === "finish" && r.on !== undefined) {
      (managers[r.on] as KvBlockManager).free(r.id);
      // The next chunk: the whole context and more, continuing the chain (the rollout sim's continuation).
      const tokens = [...r.tokens, ...op.suffix];
      const chain = memoising ? r.chain.continuedBy(tokens) : new BlockHashChain();
      if (memoising && chain.hashAt(0) !== undefined) seen.continued++;
      reqs[op.r] = { id: `r${seq++}`, tokens, on: undefined, chain };
      trace.push(["finish", r.id]);
    } else if (op.kind === "fill") {
      // Another request passing through: takes free blocks and leaves cached ones (evictions to L3).
      const m = managers[op.m] as KvBlockManager;
      const id = `fill${seq++}`;
      const tokens = Array.from({ length: op.len }, (_, i) => 3 + ((i * 7 + seq) % 5));
      const chain = new BlockHashChain();
      const hit = m.getComputedBlocks(tokens, chain);
      trace.push(["fill", hit.numCachedTokens, m.allocateSlots(id, tokens, tokens.length - hit.numCachedTokens, hit.blockIds, chain)]);
      m.free(id);
    }
    if (trace.length > 0 && JSON.stringify(trace[trace.length - 1]).includes('"tier":"L3"')) seen.tierHits++;
    trace.push(managers.map((m) => [m.freeQueueOrder(), m.stats(), m.numFreeBlocks()]), l3.lruOrder(), l3.evictions());
    for (const m of managers) m.checkInvariants();
  }
  return trace;
}

describe("KvBlockManager repeated lookups", () => {
  it("give what a lookup from scratch gives: hits, loads, allocations, free queue, tier order and counters", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        expect(run(s, true)).toEqual(run(s, false));
      }),
      { numRuns: 300, seed: 18 },
    );
    // The shortcuts were taken: repeated answers, loads from L3, continued chains.
    expect(seen.repeated).toBeGreaterThan(50);
    expect(seen.tierHits).toBeGreaterThan(20);
    expect(seen.continued).toBeGreaterThan(20);
  });
});
