import { describe, expect, it } from "vitest";
import { createSeerScheduler } from "./seer.js";
import type { InstanceView, RolloutGroupSpec } from "./types.js";

const group = (id: string, n: number, maxTokens = 100): RolloutGroupSpec => ({
  id,
  requests: Array.from({ length: n }, (_, i) => ({ id: `${id}/${i}`, groupId: id, index: i, promptTokens: 10, maxTokens })),
});
const inst = (name: string, active = 0, reserved = 0, maxActive = 1, cap = 1000): InstanceView => ({ name, kvCapacityTokens: cap, usedKvTokens: reserved, active, maxActive });

describe("seer scheduler", () => {
  it("runs each group's probe first, shortest-generated first", () => {
    const s = createSeerScheduler({ chunkTokens: 20 });
    for (const g of ["a", "b", "c"]) s.addGroup(group(g, 3), 0);
    const first = s.next([inst("x", 0, 0, 3)], 0).map((p) => p.requestId);
    expect(first).toEqual(["a/0", "b/0", "c/0"]);
    // a/0 and c/0 end a chunk; c generated less, so c/0 goes before a/0 though a arrived first.
    s.onChunkEnd("a/0", 20, false, 1);
    s.onChunkEnd("c/0", 5, false, 1);
    expect(s.next([inst("x", 1, 0, 3)], 1).map((p) => p.requestId)).toEqual(["c/0", "a/0"]);
  });

  it("ranks the rest longest-estimate-first: unknown groups at the budget, known ones by their longest finished sample", () => {
    const s = createSeerScheduler({ chunkTokens: 100 });
    for (const g of ["a", "b", "c"]) s.addGroup(group(g, 2), 0);
    expect(s.next([inst("x", 0, 0, 3)], 0).map((p) => p.requestId)).toEqual(["a/0", "b/0", "c/0"]);
    s.onChunkEnd("a/0", 10, true, 1); // a is short
    s.onChunkEnd("b/0", 60, true, 1); // b is long
    // c has no finished sample: estimated at the budget (100) → first; then b (60), then a (10).
    expect(s.next([inst("x", 1, 0, 4)], 1).map((p) => p.requestId)).toEqual(["c/1", "b/1", "a/1"]);
  });

  it("divides requests into chunks placed on the instance with the most free KV, never past its capacity or slots", () => {
    const s = createSeerScheduler({ chunkTokens: 30 });
    s.addGroup(group("a", 4), 0);
    const out = s.next([inst("x", 0, 900, 4), inst("y", 0, 850, 4)], 0);
    // Each chunk needs 10 + 0 + 30 = 40 KV tokens: y (150 free) takes 3 until it is below x (100 free).
    expect(out.map((p) => [p.requestId, p.instance, p.maxTokens])).toEqual([
      ["a/0", "y", 30],
      ["a/1", "y", 30],
      ["a/2", "x", 30],
      ["a/3", "y", 30],
    ]);
    s.onChunkEnd("a/0", 30, false, 5);
    // The continuation carries its progress; its need grows with it (10 + 30 + 30 = 70).
    const [c] = s.next([inst("x", 0, 935, 4), inst("y", 0, 0, 4)], 5);
    expect(c).toMatchObject({ requestId: "a/0", instance: "y", generated: 30, maxTokens: 30 });
    s.onChunkEnd("a/0", 30, false, 6);
    const [last] = s.next([inst("y", 0, 0, 4)], 6);
    expect(last).toMatchObject({ generated: 60, maxTokens: 30 });
    s.onChunkEnd("a/0", 10, true, 7);
    expect(s.next([inst("y", 0, 0, 4)], 7)).toEqual([]); // a/1..3 are still placed
    expect(s.unfinished()).toBe(3);
  });

  it("a starving request goes first and holds the line until it fits", () => {
    const s = createSeerScheduler({ chunkTokens: 50, starvationMs: 100 });
    s.addGroup(group("a", 1), 0);
    s.addGroup(group("b", 2), 0);
    const [p] = s.next([inst("x", 0, 0, 1)], 0);
    expect(p?.requestId).toBe("a/0");
    s.onChunkEnd("a/0", 50, true, 200);
    // b/0 and b/1 have waited 200 ms: starving, oldest (then sample order) first. b/0 fits (60
    // free ≥ 10 + 50), b/1 does not and nothing ranked behind it may jump it.
    s.addGroup(group("c", 1), 200);
    expect(s.next([inst("x", 0, 940, 5)], 200).map((q) => q.requestId)).toEqual(["b/0"]);
  });

  it("refuses a chunk no instance can ever hold, naming the request", () => {
    const s = createSeerScheduler({ chunkTokens: 500 });
    s.addGroup(group("a", 1, 1000), 0);
    expect(() => s.next([inst("x", 0, 0, 1, 100)], 0)).toThrow(/a\/0 needs 510 KV tokens .* \(100\)/);
  });
});
