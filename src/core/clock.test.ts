import { describe, expect, it } from "vitest";
import { VirtualClock } from "./clock.js";

describe("VirtualClock", () => {
  it("fires timers in time then creation order, and not cancelled ones", () => {
    const c = new VirtualClock(100);
    const seen: string[] = [];
    c.setTimer(20, () => seen.push("b"));
    c.setTimer(10, () => seen.push("a"));
    c.setTimer(20, () => seen.push("c"));
    c.setTimer(5, () => seen.push("x")).cancel();
    c.advance(15);
    expect(seen).toEqual(["a"]);
    expect(c.now()).toBe(115);
    c.advance(100);
    expect(seen).toEqual(["a", "b", "c"]);
    expect(c.pendingTimers).toBe(0);
  });

  it("timers scheduled by timers fire in the same advance when due", () => {
    const c = new VirtualClock();
    const at: number[] = [];
    c.setTimer(1, () => c.setTimer(1, () => at.push(c.now())));
    c.advance(5);
    expect(at).toEqual([2]);
  });

  it("sleep resolves when time passes; step jumps to the next timer", async () => {
    const c = new VirtualClock();
    let done = false;
    const p = c.sleep(50).then(() => (done = true));
    expect(c.step()).toBe(true);
    await p;
    expect(done).toBe(true);
    expect(c.now()).toBe(50);
    expect(c.step()).toBe(false);
  });

  it("rejects negative delays", () => {
    expect(() => new VirtualClock().setTimer(-1, () => {})).toThrow(RangeError);
  });
});
