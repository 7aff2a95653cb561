import { describe, expect, it } from "vitest";
import { checkChunkTokens, chunkKvNeed, generationEnded, nextChunkTokens, rankByFreeKv } from "./divided-plan.js";

describe("divided plan (the rules the gateway and the scheduling policies share)", () => {
  it("sizes a chunk as min(chunk, budget left) and its KV as prompt ‖ generated ‖ chunk", () => {
    expect(nextChunkTokens(16, 40, 0)).toBe(16);
    expect(nextChunkTokens(16, 40, 32)).toBe(8);
    expect(nextChunkTokens(16, 40, 40)).toBe(0);
    expect(nextChunkTokens(Infinity, 40, 10)).toBe(30);
    expect(chunkKvNeed(100, 32, 8)).toBe(140);
  });

  it("ends a generation on stop, abort, spent budget or a short chunk, and not otherwise", () => {
    const base = { stopped: false, aborted: false, generated: 16, maxTokens: 40, chunkAsked: 16, chunkGot: 16 };
    expect(generationEnded(base)).toBe(false);
    expect(generationEnded({ ...base, stopped: true })).toBe(true);
    expect(generationEnded({ ...base, aborted: true })).toBe(true);
    expect(generationEnded({ ...base, generated: 40 })).toBe(true);
    expect(generationEnded({ ...base, chunkGot: 15 })).toBe(true);
  });

  it("ranks by free KV, unknown last, ties in the given order, leaving out the unavailable", () => {
    const ranked = rankByFreeKv([
      { name: "a", freeKvTokens: 10 },
      { name: "b", freeKvTokens: null },
      { name: "c", freeKvTokens: 30 },
      { name: "d", freeKvTokens: 10 },
      { name: "e", freeKvTokens: 99, unavailable: "down" },
    ]);
    expect(ranked.map((c) => c.name)).toEqual(["c", "a", "d", "b"]);
  });

  it("refuses a chunk size that is not an integer >= 1 (Infinity = no division), naming the field", () => {
    expect(() => checkChunkTokens("seer", "chunkTokens", 0, "config")).toThrow("seer: chunkTokens must be an integer >= 1, got 0");
    expect(() => checkChunkTokens("seer", "chunkTokens", 2.5, "config")).toThrow(/got 2.5/);
    expect(() => checkChunkTokens("seer", "chunkTokens", Infinity, "config")).not.toThrow();
  });
});
