import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { HealthLoop } from "./health-loop.js";
import type { HealthTransition } from "./health-tracker.js";

describe("HealthLoop under a virtual clock", () => {
  it("checks on its timers, reports transitions, and stops arming when stopped", async () => {
    const clock = new VirtualClock(0);
    const healthy = new Map([
      ["a", true],
      ["b", true],
    ]);
    const checked: string[] = [];
    const transitions: HealthTransition[] = [];
    const loop = new HealthLoop({
      backends: ["a", "b"],
      intervalMs: 1000,
      recheckMs: 100,
      clock,
      check: async (b) => {
        checked.push(`${b}@${clock.now()}`);
        if (!healthy.get(b)) throw new Error(`${b} is down`);
      },
      onTransition: (t) => transitions.push(t),
    });
    loop.start();
    expect(clock.pendingTimers).toBe(1);
    healthy.set("b", false);
    clock.advance(1000);
    await settle();
    expect(checked).toEqual(["a@1000", "b@1000"]);
    expect(transitions).toEqual([{ backend: "b", up: false, cause: "b is down" }]);
    // 'b' is rechecked every 100 ms while down; it comes back once its check passes.
    clock.advance(100);
    await settle();
    healthy.set("b", true);
    clock.advance(100);
    await settle();
    expect(checked.filter((c) => c.startsWith("b"))).toEqual(["b@1000", "b@1100", "b@1200"]);
    expect(transitions.at(-1)).toEqual({ backend: "b", up: true });
    // A failed call takes a backend out at once and schedules its recheck.
    loop.callFailed("a", "socket hang up");
    expect(loop.tracker.isUp("a")).toBe(false);
    expect(transitions.at(-1)).toEqual({ backend: "a", up: false, cause: "socket hang up" });
    clock.advance(100);
    await settle();
    expect(loop.tracker.isUp("a")).toBe(true);
    loop.stop();
    expect(clock.pendingTimers).toBe(0);
    clock.advance(10_000);
    await settle();
    expect(checked.at(-1)).toBe("a@1300");
  });
});

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}
