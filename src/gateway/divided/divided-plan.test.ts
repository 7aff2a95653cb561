import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkChunkTokens, chunkKvNeed, generationEnded, mostFreeKv, nextChunkTokens, rankByFreeKv } from "./divided-plan.js";

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

  it("mostFreeKv picks rankByFreeKv's first, with or without an availability rule (fast-check)", () => {
    const candidate = fc.record({ freeKvTokens: fc.option(fc.integer({ min: 0, max: 5 })), down: fc.boolean(), slots: fc.integer({ min: 0, max: 2 }) });
    fc.assert(
      fc.property(fc.array(candidate, { maxLength: 12 }), (cs) => {
        const named = cs.map((c, i) => ({ ...c, name: `i${i}`, ...(c.down ? { unavailable: "down" } : {}) }));
        expect(mostFreeKv(named)).toBe(rankByFreeKv(named)[0]);
        const withSlot = (c: (typeof named)[number]): boolean => c.slots > 0;
        // The rule replaces `unavailable`: rank exactly the candidates it admits.
        const admitted = named.filter(withSlot).map((c) => ({ name: c.name, freeKvTokens: c.freeKvTokens }));
        expect(mostFreeKv(named, withSlot)?.name).toBe(rankByFreeKv(admitted)[0]?.name);
      }),
    );
    expect(mostFreeKv([])).toBeUndefined();
  });

  it("refuses a chunk size that is not an integer >= 1 (Infinity = no division), naming the field", () => {
    expect(() => checkChunkTokens("seer", "chunkTokens", 0, "config")).toThrow("seer: chunkTokens must be an integer >= 1, got 0");
    expect(() => checkChunkTokens("seer", "chunkTokens", 2.5, "config")).toThrow(/got 2.5/);
    expect(() => checkChunkTokens("seer", "chunkTokens", Infinity, "config")).not.toThrow();
  });
});
