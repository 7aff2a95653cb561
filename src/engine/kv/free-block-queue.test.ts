// Tests of the free-block queue (doubly linked list in eviction order).
import { describe, expect, it } from "vitest";
import { FreeBlockQueue } from "./free-block-queue.js";

describe("FreeBlockQueue", () => {
  it("pops from the head, removes from the middle, and pushes at either end", () => {
    const q = new FreeBlockQueue(5);
    expect(q.popFront()).toBe(0);
    q.remove(2);
    expect(q.toArray()).toEqual([1, 3, 4]);
    q.pushBack(2);
    q.pushFront(0);
    expect(q.toArray()).toEqual([0, 1, 3, 4, 2]);
    expect(q.popFrontSkipping(new Set([0, 1]))).toBe(3);
    expect(q.length).toBe(4);
    q.check();
    expect(() => q.pushBack(1)).toThrow(/already in the queue/);
    expect(() => q.remove(3)).toThrow(/not in the queue/);
    for (let i = 0; i < 4; i++) q.popFront();
    expect(q.popFront()).toBeUndefined();
    q.check();
  });
});
