import { describe, expect, it } from "vitest";
import { timeOrderedId } from "./time-ordered-id.js";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("timeOrderedId", () => {
  it("is a version-7 UUID carrying its millisecond stamp", () => {
    const ms = 1_796_000_000_123;
    const id = timeOrderedId(ms);
    expect(id).toMatch(V7);
    expect(parseInt(id.replace(/-/g, "").slice(0, 12), 16)).toBe(ms);
    expect(timeOrderedId(0)).toMatch(/^00000000-0000-7/);
    expect(timeOrderedId(2 ** 60)).toMatch(/^ffffffff-ffff-7/);
  });

  it("sorts by time across milliseconds and differs within one", () => {
    const ids = [];
    for (let ms = 1_700_000_000_000; ms < 1_700_000_000_000 + 300; ms += 3) ids.push(timeOrderedId(ms), timeOrderedId(ms + 0.5));
    const later = ids.filter((_, i) => i % 2 === 0);
    expect([...later].sort()).toEqual(later);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
