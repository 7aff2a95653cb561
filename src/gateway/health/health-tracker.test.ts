import { describe, expect, it } from "vitest";
import { HealthTracker } from "./health-tracker.js";

describe("HealthTracker", () => {
  it("takes a backend out on a failed check or call and back in on a passing check", () => {
    const t = new HealthTracker({ backends: ["a", "b"], intervalMs: 1000, recheckMs: 200 }, 0);
    expect(t.due(999)).toEqual([]);
    expect(t.due(1000)).toEqual(["a", "b"]);
    // Checks in flight are not due again.
    expect(t.due(5000)).toEqual([]);
    expect(t.onCheck("a", 1010)).toBeUndefined();
    expect(t.onCheck("b", 1020, "connect ECONNREFUSED")).toEqual({ backend: "b", up: false, cause: "connect ECONNREFUSED" });
    expect(t.isUp("b")).toBe(false);
    expect(t.causeOf("b")).toBe("connect ECONNREFUSED");
    // Out of rotation: rechecked after recheckMs, not the interval.
    expect(t.nextDueIn(1020)).toBe(200);
    expect(t.due(1220)).toEqual(["b"]);
    expect(t.onCheck("b", 1230, "still down")).toBeUndefined();
    expect(t.due(1430)).toEqual(["b"]);
    expect(t.onCheck("b", 1440)).toEqual({ backend: "b", up: true });
    expect(t.causeOf("b")).toBeUndefined();
    expect(t.nextDueIn(1440)).toBe(1010 + 1000 - 1440);
    expect(t.onCallFailed("a", 1500, "socket hang up")).toEqual({ backend: "a", up: false, cause: "socket hang up" });
    expect(t.onCallFailed("a", 1501, "again")).toBeUndefined();
  });

  it("keeps the last backend in rotation on a failed call, but not on a failed check", () => {
    const t = new HealthTracker({ backends: ["a", "b"] }, 0);
    // Without an interval, backends in rotation are not checked at all.
    expect(t.nextDueIn(0)).toBeUndefined();
    expect(t.onCallFailed("a", 0, "reset")?.up).toBe(false);
    expect(t.onCallFailed("b", 0, "reset")).toBeUndefined();
    expect(t.isUp("b")).toBe(true);
    // ...but it is checked soon, and a failed check takes it out.
    expect(t.due(1000)).toEqual(["a", "b"]);
    expect(t.onCheck("b", 1000, "refused")?.up).toBe(false);
  });

  it("rejects bad intervals and unknown backends", () => {
    expect(() => new HealthTracker({ backends: ["a"], intervalMs: 0 }, 0)).toThrow(/gateway.health.intervalMs: must be an integer >= 1/);
    expect(() => new HealthTracker({ backends: ["a"], recheckMs: 1.5 }, 0)).toThrow(/recheckMs/);
    expect(() => new HealthTracker({ backends: ["a"] }, 0).isUp("x")).toThrow(/unknown backend 'x'/);
  });
});
