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

  it("fires many interleaved timers in (time, creation) order and counts only live ones", () => {
    const clock = new VirtualClock();
    const fired: number[] = [];
    const timers = [];
    // Delays 0..9 repeated, so equal times are broken by creation order; every third one cancelled.
    for (let i = 0; i < 60; i++) timers.push(clock.setTimer((i * 7) % 10, () => fired.push(i)));
    for (let i = 0; i < 60; i += 3) {
      timers[i]?.cancel();
      timers[i]?.cancel(); // idempotent
    }
    expect(clock.pendingTimers).toBe(40);
    while (clock.step());
    const want = Array.from({ length: 60 }, (_, i) => i)
      .filter((i) => i % 3 !== 0)
      .sort((a, b) => ((a * 7) % 10) - ((b * 7) % 10) || a - b);
    expect(fired).toEqual(want);
    expect(clock.pendingTimers).toBe(0);
    expect(clock.now()).toBe(9);
  });

  it("cancelling a timer that has fired changes nothing", () => {
    const c = new VirtualClock();
    const fired = c.setTimer(1, () => {});
    c.setTimer(5, () => {});
    c.advance(2);
    expect(c.pendingTimers).toBe(1);
    fired.cancel();
    expect(c.pendingTimers).toBe(1);
  });

  it("rejects negative delays", () => {
    expect(() => new VirtualClock().setTimer(-1, () => {})).toThrow(RangeError);
  });
});
