import { describe, expect, it } from "vitest";
import { createFifoGroupScheduler } from "./fifo-group.js";
import type { InstanceView } from "./types.js";

const views: InstanceView[] = ["x", "y"].map((name) => ({ name, kvCapacityTokens: 10, usedKvTokens: 0, active: 0, maxActive: 1 }));
const group = (id: string, n: number) => ({ id, requests: Array.from({ length: n }, (_, i) => ({ id: `${id}/${i}`, groupId: id, index: i, promptTokens: 5, maxTokens: 50 })) });

describe("fifo-group scheduler", () => {
  it("binds each group to one instance, the least loaded, and sends all its requests at once with the whole budget", () => {
    const s = createFifoGroupScheduler();
    s.addGroup(group("a", 3), 0);
    s.addGroup(group("b", 2), 0);
    s.addGroup(group("c", 2), 0);
    const out = s.next(views, 0);
    // Capacity and slots are the engine's business here: everything goes out now.
    expect(out.map((p) => [p.requestId, p.instance, p.maxTokens])).toEqual([
      ["a/0", "x", 50],
      ["a/1", "x", 50],
      ["a/2", "x", 50],
      ["b/0", "y", 50],
      ["b/1", "y", 50],
      ["c/0", "y", 50],
      ["c/1", "y", 50],
    ]);
  });

  it("sends an interrupted request back to its group's instance, to continue from where it stopped", () => {
    const s = createFifoGroupScheduler();
    s.addGroup(group("a", 1), 0);
    s.addGroup(group("b", 1), 0);
    s.next(views, 0);
    s.onChunkEnd("b/0", 20, false, 3);
    expect(s.next(views, 3)).toEqual([{ requestId: "b/0", instance: "y", maxTokens: 30, generated: 20, priority: 1 }]);
    s.onChunkEnd("b/0", 30, false, 4); // budget spent: complete whatever the caller says
    expect(s.unfinished()).toBe(1);
  });

  it("rebinds a group whose instance is gone to the least-loaded remaining one", () => {
    const s = createFifoGroupScheduler();
    s.addGroup(group("a", 2), 0);
    expect(s.next(views, 0).map((p) => p.instance)).toEqual(["x", "x"]);
    s.onChunkEnd("a/1", 7, false, 1);
    const [p] = s.next([views[1] as InstanceView], 1);
    expect(p).toMatchObject({ requestId: "a/1", instance: "y", generated: 7, maxTokens: 43 });
    s.onChunkEnd("a/0", 50, true, 2);
    s.onChunkEnd("a/1", 43, true, 2);
    expect(s.unfinished()).toBe(0);
  });
});
