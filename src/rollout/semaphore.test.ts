import { describe, expect, it } from "vitest";
import { Semaphore } from "./semaphore.js";

describe("Semaphore", () => {
  it("never runs more than capacity at once and serves waiters FIFO", async () => {
    const s = new Semaphore(2);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const gates: (() => void)[] = [];
    const jobs = [0, 1, 2, 3, 4].map((i) =>
      s.with(async () => {
        running++;
        peak = Math.max(peak, running);
        order.push(i);
        await new Promise<void>((r) => gates.push(r));
        running--;
      }),
    );
    while (order.length < 5) {
      await Promise.resolve();
      await new Promise((r) => setImmediate(r));
      gates.shift()?.();
    }
    gates.forEach((g) => g());
    await Promise.all(jobs);
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it("rejects bad capacity and over-release", () => {
    expect(() => new Semaphore(0)).toThrow(RangeError);
    expect(() => new Semaphore(1).release()).toThrow(/released more often/);
  });
});
