import { describe, expect, it } from "vitest";
import { stalenessCapacity } from "./staleness.js";

describe("AReaL staleness capacity", () => {
  const base = { maxConcurrent: 10, running: 0, accepted: 0, version: 0, batchSize: 4, maxStaleness: 0 };
  it("η = 0 admits one batch per version (synchronous)", () => {
    expect(stalenessCapacity(base)).toBe(4);
    expect(stalenessCapacity({ ...base, running: 3, accepted: 1 })).toBe(0);
    expect(stalenessCapacity({ ...base, running: 0, accepted: 4, version: 1 })).toBe(4);
  });
  it("η lets rollout run η versions ahead; the concurrency bound still applies", () => {
    expect(stalenessCapacity({ ...base, maxStaleness: 2 })).toBe(10); // min(10, 12)
    expect(stalenessCapacity({ ...base, maxStaleness: 2, running: 5, accepted: 5 })).toBe(2); // min(5, 12 − 10)
    expect(stalenessCapacity({ ...base, maxStaleness: Infinity, running: 9, accepted: 1000 })).toBe(1);
    expect(stalenessCapacity({ ...base, running: 20 })).toBe(0);
  });
  it("rejects a negative η or a bad batch size", () => {
    expect(() => stalenessCapacity({ ...base, maxStaleness: -1 })).toThrow(/maxStaleness \(η\) must be >= 0/);
    expect(() => stalenessCapacity({ ...base, batchSize: 0 })).toThrow(/batchSize must be an integer >= 1/);
  });
});
