import { describe, expect, it } from "vitest";
import { createCapacityFilter } from "./capacity-filter.js";
import { createCostAwareScorer, dynamoCosts } from "./cost-aware.js";
import { createHealthyFilter } from "./healthy-filter.js";
import { createKvUsageScorer } from "./kv-usage.js";
import { createLeastLoadScorer } from "./least-load.js";
import { createPrefixAffinityScorer } from "./prefix-affinity.js";
import { createStickyProgramScorer } from "./sticky-program.js";
import { argmax, context, view } from "../../testing/routing-helpers.js";

const tokens = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

describe("filters", () => {
  it("healthy keeps backends in rotation only", () => {
    const bs = [view("a", { healthy: false }), view("b"), view("c", { healthy: false })];
    expect(createHealthyFilter().filter({ programId: "p" }, bs).map((b) => b.name)).toEqual(["b"]);
  });

  it("capacity drops backends too small for the prompt, and full ones while another has room", () => {
    const f = createCapacityFilter({ maxKvUsage: 0.9 });
    const bs = [view("small", { kvCapacityTokens: 50 }), view("full", { kvUsage: 0.95 }), view("ok", { kvUsage: 0.5 }), view("unknown")];
    expect(f.filter({ programId: "p", estimatedPromptTokens: 100 }, bs).map((b) => b.name)).toEqual(["ok", "unknown"]);
    // All full: keep them (engines queue) rather than refuse; too small is still out.
    const allFull = [view("x", { kvUsage: 0.99 }), view("y", { kvUsage: 0.97 }), view("tiny", { kvCapacityTokens: 10, kvUsage: 0.1 })];
    expect(f.filter({ programId: "p", promptTokens: tokens(20) }, allFull).map((b) => b.name)).toEqual(["x", "y"]);
    expect(() => createCapacityFilter({ maxKvUsage: 1.5 })).toThrow();
  });
});

describe("least-load", () => {
  it("scores 1 for the least loaded, 0 for the most, counting queued calls", () => {
    const bs = [view("a", { inFlight: 4 }), view("b", { inFlight: 1, queued: 1 }), view("c", { inFlight: 6 })];
    const s = createLeastLoadScorer().score(context({ programId: "p" }, bs));
    expect(s).toEqual([0.5, 1, 0]);
    expect(createLeastLoadScorer().score(context({ programId: "p" }, [view("a"), view("b")]))).toEqual([1, 1]);
  });
});

describe("kv-usage", () => {
  it("prefers the emptiest cache, estimating usage when not scraped and neutral when unknown", () => {
    const bs = [
      view("scraped", { kvUsage: 0.8 }),
      view("estimated", { kvCapacityTokens: 1000, activeTokens: 250 }),
      view("unknown"),
      view("over", { kvCapacityTokens: 100, activeTokens: 300 }),
    ];
    const s = createKvUsageScorer().score(context({ programId: "p" }, bs));
    expect(s[0]).toBeCloseTo(0.2);
    expect(s[1]).toBeCloseTo(0.75);
    expect(s[2]).toBe(0.5);
    expect(s[3]).toBe(0);
    expect(argmax(bs, s)).toBe("estimated");
  });
});

describe("sticky-program", () => {
  it("first call goes to the least loaded, later calls to the bound backend even when busier", () => {
    const sc = createStickyProgramScorer();
    const bs = [view("a", { inFlight: 3 }), view("b", { inFlight: 1 })];
    expect(argmax(bs, sc.score(context({ programId: "p" }, bs)))).toBe("b");
    expect(sc.score(context({ programId: "p" }, bs, undefined, "a"))).toEqual([1, 0]);
    // Bound backend filtered out (unhealthy): fall back to least loaded among the rest.
    expect(sc.score(context({ programId: "p" }, [view("b"), view("c", { inFlight: 2 })], undefined, "a"))).toEqual([1, 0]);
  });
});

describe("prefix-affinity (sgl-router cache_aware)", () => {
  const req = { programId: "p", promptTokens: tokens(100) };

  it("balanced load: the longest prefix match wins when its ratio is above 0.3", () => {
    const sc = createPrefixAffinityScorer();
    const bs = [view("a", { inFlight: 10 }), view("b", { inFlight: 40 }), view("c", { inFlight: 20 })];
    const s = sc.score(context(req, bs, [10, 80, 31]));
    expect(sc.lastMode).toBe("prefix-match");
    expect(argmax(bs, s)).toBe("b");
    expect(s).toEqual([0.1, 0.8, 0.31]);
  });

  it("imbalanced load (gap > 64 and max > 1.5 × min): the least loaded wins despite a perfect match", () => {
    const sc = createPrefixAffinityScorer();
    const bs = [view("a", { inFlight: 100 }), view("b", { inFlight: 30 })];
    const s = sc.score(context(req, bs, [100, 0]));
    expect(sc.lastMode).toBe("least-load");
    expect(argmax(bs, s)).toBe("b");
  });

  it("needs both thresholds to call the load imbalanced", () => {
    const sc = createPrefixAffinityScorer();
    // Gap 65 > 64 but 200 < 1.5 × 135 = 202.5: balanced, prefix wins.
    sc.score(context(req, [view("a", { inFlight: 200 }), view("b", { inFlight: 135 })], [90, 0]));
    expect(sc.lastMode).toBe("prefix-match");
    // Ratio 10 > 1.5 but gap 60 < 64: balanced.
    sc.score(context(req, [view("a", { inFlight: 60, queued: 0 }), view("b", { queued: 0 })], [90, 0]));
    expect(sc.lastMode).toBe("prefix-match");
    // Gap exactly 64 is not above it.
    sc.score(context(req, [view("a", { inFlight: 64 }), view("b")], [90, 0]));
    expect(sc.lastMode).toBe("prefix-match");
    sc.score(context(req, [view("a", { inFlight: 65 }), view("b")], [90, 0]));
    expect(sc.lastMode).toBe("least-load");
  });

  it("weak match (ratio ≤ 0.3) or unknown tokens: the backend with the smallest tree wins", () => {
    const sc = createPrefixAffinityScorer();
    const bs = [view("a", { treeTokens: 5000 }), view("b", { treeTokens: 100 }), view("c", { treeTokens: 900 })];
    const s = sc.score(context(req, bs, [30, 0, 10])); // 30/100 is not > 0.3
    expect(sc.lastMode).toBe("smallest-tree");
    expect(argmax(bs, s)).toBe("b");
    sc.score(context({ programId: "p", estimatedPromptTokens: 100 }, bs));
    expect(sc.lastMode).toBe("smallest-tree");
  });

  it("takes configured thresholds", () => {
    const sc = createPrefixAffinityScorer({ cacheThreshold: 0.9, balanceAbsThreshold: 2, balanceRelThreshold: 1.1 });
    sc.score(context(req, [view("a", { inFlight: 5 }), view("b", { inFlight: 2 })], [95, 0]));
    expect(sc.lastMode).toBe("least-load");
    sc.score(context(req, [view("a", { inFlight: 2 }), view("b", { inFlight: 2 })], [85, 0]));
    expect(sc.lastMode).toBe("smallest-tree");
    expect(() => createPrefixAffinityScorer({ cacheThreshold: 2 })).toThrow();
  });
});

describe("cost-aware (Dynamo)", () => {
  it("computes the cost worked by hand", () => {
    // block 16, prompt 100 tokens → 7 incoming blocks.
    // a: overlap 64 tokens = 4 blocks; prefill (32 + 100 − 64)/16 = 4.25; decode ceil(200/16) = 13 → 24.25
    // b: no overlap;                  prefill (0 + 100)/16 = 6.25;        decode 400/16 = 25      → 38.25
    const bs = [view("a", { activePrefillTokens: 32, activeTokens: 200 }), view("b", { activeTokens: 400 })];
    const ctx = context({ programId: "p", promptTokens: tokens(100) }, bs, [64, 0]);
    expect(dynamoCosts(ctx)).toEqual([24.25, 38.25]);
    // prefill_load_scale 2: a = 2 × 4.25 + 13 + 7 = 28.5; b = 2 × 6.25 + 25 + 7 = 44.5
    expect(dynamoCosts(ctx, { prefillLoadScale: 2 })).toEqual([28.5, 44.5]);
    // Overlap counts whole blocks only: 70 matched tokens = 4 blocks, same as 64.
    expect(dynamoCosts(context(ctx.request, bs, [70, 0]))).toEqual([24.25, 38.25]);
    // A backend-reported block size wins over the default: a with 32-token blocks.
    // overlap 2 blocks = 64; prefill (32 + 36)/32 = 2.125; decode ceil(200/32) = 7; incoming ceil(100/32) = 4 → 13.125
    expect(dynamoCosts(context(ctx.request, [view("a", { activePrefillTokens: 32, activeTokens: 200, blockSize: 32 })], [64]))).toEqual([13.125]);
  });

  it("trades cache overlap against load: the cached backend wins unless prefill is ignored", () => {
    // a: 96 cached (6 blocks), 240 active (15 blocks): 0.25 + 15 + 7 = 22.25
    // b: nothing cached, 160 active (10 blocks):       6.25 + 10 + 7 = 23.25
    const bs = [view("a", { activeTokens: 240 }), view("b", { activeTokens: 160 })];
    const ctx = context({ programId: "p", promptTokens: tokens(100) }, bs, [96, 0]);
    expect(argmax(bs, createCostAwareScorer().score(ctx))).toBe("a");
    expect(createCostAwareScorer().score(ctx)).toEqual([1, 0]);
    // Scale 0 is pure load balancing: a = 22, b = 17.
    expect(dynamoCosts(ctx, { prefillLoadScale: 0 })).toEqual([22, 17]);
    expect(argmax(bs, createCostAwareScorer({ prefillLoadScale: 0 }).score(ctx))).toBe("b");
  });
});
