// The waiting head of a full engine: its long prefix is looked up at every step while running requests
// take the free blocks it hits one by one (evicting them to L3). Its lookup replays the memo from the
// change log, searching again only the hits that changed; it must give exactly what a lookup from scratch
// gives (a fresh hash chain each time: no memo, no proofs, nothing repeatable), and the two managers must
// end in the same state.
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { BlockHashChain } from "./block-hash.js";
import { KvBlockManager } from "./block-manager.js";
import { InProcessKvTier } from "./tier.js";

type Op = { kind: "wait" } | { kind: "decode"; r: number; tok: number } | { kind: "free"; r: number } | { kind: "admit" } | { kind: "copy"; r: number; blocks: number };

const tok = fc.integer({ min: 0, max: 2 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.constant({ kind: "wait" as const }), weight: 6 },
  { arbitrary: fc.record({ kind: fc.constant("decode" as const), r: fc.nat(3), tok }), weight: 8 },
  { arbitrary: fc.record({ kind: fc.constant("free" as const), r: fc.nat(3) }), weight: 1 },
  { arbitrary: fc.constant({ kind: "admit" as const }), weight: 1 },
  // A sibling computing the head's leading blocks again (no lookup): a second L1 copy a replay can find.
  { arbitrary: fc.record({ kind: fc.constant("copy" as const), r: fc.nat(3), blocks: fc.integer({ min: 1, max: 4 }) }), weight: 1 },
);
const scenarioArb = fc.record({
  blockSize: fc.integer({ min: 1, max: 3 }),
  // The head's prompt: its first part is computed by another request first (then cached, free), its own
  // tokens follow (the head's last block is always computed).
  shared: fc.array(tok, { minLength: 20, maxLength: 90 }),
  own: fc.array(tok, { minLength: 1, maxLength: 6 }),
  spareBlocks: fc.integer({ min: 4, max: 16 }),
  // Without L3 an evicted hit is gone: the replay's search misses and the hits end there.
  l3: fc.boolean(),
  ops: fc.array(opArb, { minLength: 20, maxLength: 150, size: "max" }),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

function run(s: Scenario, memoising: boolean): unknown[] {
  const bs = s.blockSize;
  const sharedBlocks = Math.ceil(s.shared.length / bs);
  // Room for the shared prefix and the running requests, nothing more: the free queue is the head's hits.
  const numBlocks = sharedBlocks + s.spareBlocks;
  const kv = new KvBlockManager({ blockSize: bs, numBlocks, enablePrefixCaching: true, bytesPerToken: 2, ...(s.l3 ? { l3: new InProcessKvTier({ name: "L3", capacityBlocks: 10_000, bandwidthBytesPerMs: 1 }) } : {}) });
  kv.allocateSlots("prefix", s.shared, s.shared.length, [], new BlockHashChain());
  kv.free("prefix");
  // Running requests (tokens 3.., never the head's) take every block the prefix does not hold.
  const running = Array.from({ length: 4 }, (_, r) => ({ id: `run${r}`, tokens: [] as number[], on: false }));
  for (let b = 0, r = 0; b < s.spareBlocks; b++, r = (r + 1) % running.length) {
    const x = running[r] as (typeof running)[number];
    for (let t = 0; t < bs; t++) x.tokens.push(3 + ((x.tokens.length * 5 + r) % 7));
    x.on = true;
  }
  for (const x of running) if (x.on) kv.allocateSlots(x.id, x.tokens, x.tokens.length, [], new BlockHashChain());
  const head = [...s.shared, ...s.own];
  let headChain = new BlockHashChain();
  let headOn = false;
  let seq = 0;
  const trace: unknown[] = [];
  for (const op of s.ops) {
    if (op.kind === "wait" && !headOn) {
      const hit = kv.getComputedBlocks(head, memoising ? headChain : new BlockHashChain());
      trace.push(["wait", [...hit.blockIds], hit.numCachedTokens, hit.fromTier, hit.loadedBlockIds]);
    } else if (op.kind === "admit" && !headOn) {
      const chain = memoising ? headChain : new BlockHashChain();
      const hit = kv.getComputedBlocks(head, chain);
      const fresh = kv.allocateSlots("head", head, head.length - hit.numCachedTokens, hit.blockIds, chain);
      headOn = fresh !== null;
      trace.push(["admit", [...hit.blockIds], hit.loadedBlockIds, fresh]);
    } else if (op.kind === "decode") {
      const x = running[op.r] as (typeof running)[number];
      if (!x.on) {
        // A new running request in its place (no prefix lookup: its tokens are its own).
        x.id = `run${op.r}.${seq++}`;
        x.tokens = [3 + op.tok];
        x.on = kv.allocateSlots(x.id, x.tokens, 1, [], new BlockHashChain()) !== null;
        trace.push(["start", x.id, x.on]);
      } else {
        x.tokens.push(3 + op.tok);
        trace.push(["decode", x.id, kv.allocateSlots(x.id, x.tokens, 1, [], new BlockHashChain())]);
      }
    } else if (op.kind === "copy") {
      const x = running[op.r] as (typeof running)[number];
      if (x.on) kv.free(x.id);
      x.id = `copy${op.r}.${seq++}`;
      x.tokens = s.shared.slice(0, Math.min(op.blocks * bs, s.shared.length));
      x.on = kv.allocateSlots(x.id, x.tokens, x.tokens.length, [], new BlockHashChain()) !== null;
      trace.push(["copy", x.id, x.on]);
    } else if (op.kind === "free") {
      const x = running[op.r] as (typeof running)[number];
      if (x.on) kv.free(x.id);
      x.on = false;
    }
    if (headOn && op.kind === "free" && op.r === 0) {
      // The head finished: a new head continues it (a divided rollout's next chunk), waiting again.
      kv.free("head");
      headOn = false;
      head.push(0, 1);
      headChain = memoising ? headChain.continuedBy(head) : new BlockHashChain();
    }
    trace.push(kv.freeQueueOrder(), kv.stats());
    kv.checkInvariants();
  }
  return trace;
}

describe("KvBlockManager lookup replay from the change log", () => {
  it("gives what a lookup from scratch gives while the waiting head's hits are evicted a few at a time", () => {
    // (Private methods, spied only to show the property covers the replay: calls, misses, searches again.)
    const proto = KvBlockManager.prototype as unknown as { replayChanged: () => boolean; searchAt: () => unknown };
    const replay = vi.spyOn(proto, "replayChanged");
    let replays = 0;
    let missed = 0;
    let searchedAgain = 0;
    try {
      fc.assert(
        fc.property(scenarioArb, (s) => {
          const fresh = run(s, false);
          replay.mockClear();
          expect(run(s, true)).toEqual(fresh);
          replays += replay.mock.calls.length;
          missed += replay.mock.results.filter((r) => r.value === true).length;
        }),
        { numRuns: 200, seed: 23 },
      );
      const search = vi.spyOn(proto, "searchAt");
      // One scenario again, counting the searches of the memoising side's replays.
      fc.assert(
        fc.property(scenarioArb, (s) => {
          search.mockClear();
          replay.mockClear();
          run(s, true);
          if (replay.mock.calls.length > 0) searchedAgain += search.mock.calls.length;
        }),
        { numRuns: 20, seed: 24 },
      );
      search.mockRestore();
    } finally {
      replay.mockRestore();
    }
    expect(replays).toBeGreaterThan(300);
    expect(missed).toBeGreaterThan(0);
    expect(searchedAgain).toBeGreaterThan(0);
  });
});
