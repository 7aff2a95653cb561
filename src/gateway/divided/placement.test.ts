import { describe, expect, it } from "vitest";
import type { BackendMetrics } from "../../backends/backend.js";
import { freeKv, rankByFreeKv } from "./placement.js";

const m = (kvCapacityTokens: number | null, kvUsage: number | null): BackendMetrics => ({
  running: null,
  waiting: null,
  kvUsage,
  kvCapacityTokens,
  prefixCacheQueries: null,
  prefixCacheHits: null,
  prefixCacheHitRate: null,
});

describe("placement by free KV", () => {
  it("computes capacity · (1 − usage) in whole tokens, clamping usage to [0, 1]", () => {
    expect(freeKv(m(1000, 0.25))).toBe(750);
    expect(freeKv(m(1000, 0.99))).toBe(10);
    expect(freeKv(m(1000, 1.3))).toBe(0);
    expect(freeKv(m(1000, -0.1))).toBe(1000);
    expect(freeKv(m(null, 0.1))).toBeNull();
    expect(freeKv(m(1000, null))).toBeNull();
  });

  it("ranks most free first, unknown after known, ties and unknowns in configured order, unavailable out", () => {
    const { ranked, scores } = rankByFreeKv([
      { name: "u1", metrics: m(null, 0) },
      { name: "small", metrics: m(500, 0) },
      { name: "down", metrics: null, error: "metrics: ECONNREFUSED" },
      { name: "big", metrics: m(4000, 0.5) },
      { name: "big2", metrics: m(2000, 0) },
      { name: "u2", metrics: m(1000, null) },
    ]);
    expect(ranked).toEqual(["big", "big2", "small", "u1", "u2"]);
    expect(scores.find((s) => s.name === "down")).toEqual({ name: "down", freeKvTokens: null, unavailable: "metrics: ECONNREFUSED" });
    expect(rankByFreeKv([]).ranked).toEqual([]);
  });
});
