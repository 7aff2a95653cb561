// Idle-timeout release in the program table: driven purely by a VirtualClock.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { ProgramTable } from "./program-table.js";

describe("ProgramTable idle release", () => {
  it("releases programs idle for idleReleaseMs, never one with a call in flight", () => {
    const clock = new VirtualClock(0);
    const t = new ProgramTable({ clock, maxPrograms: 4, idleReleaseMs: 100 });
    t.open("a");
    t.open("busy");
    t.beginCall("busy");
    clock.advance(60);
    t.open("late");
    expect(t.nextIdleCheckMs()).toBe(40);
    clock.advance(39);
    expect(t.releaseIdle()).toEqual([]);
    clock.advance(1);
    expect(t.releaseIdle()).toEqual(["a"]);
    expect(t.get("a")).toMatchObject({ state: "terminated", releasedAt: 100 });
    clock.advance(500);
    // "busy" has been in flight all along: kept; "late" expired.
    expect(t.releaseIdle()).toEqual(["late"]);
    expect(t.get("busy")?.state).toBe("active");
    t.endCall("busy", 10);
    clock.advance(99);
    expect(t.releaseIdle()).toEqual([]);
    clock.advance(1);
    expect(t.releaseIdle()).toEqual(["busy"]);
    expect(t.counts()).toEqual({ active: 0, terminated: 3 });
    expect(() => t.beginCall("a")).toThrow(/was released/);
  });

  it("is off by default and validates its option", () => {
    const clock = new VirtualClock(0);
    const t = new ProgramTable({ clock, maxPrograms: 2 });
    t.open("a");
    clock.advance(1e9);
    expect(t.releaseIdle()).toEqual([]);
    expect(t.nextIdleCheckMs()).toBeUndefined();
    expect(() => new ProgramTable({ clock, maxPrograms: 2, idleReleaseMs: 0 })).toThrow(ArborError);
    expect(() => new ProgramTable({ clock, maxPrograms: 2, idleReleaseMs: 1.5 })).toThrow(/idleReleaseMs/);
  });

  it("counts terminated programs even after their tombstones are forgotten", () => {
    const clock = new VirtualClock(0);
    const t = new ProgramTable({ clock, maxPrograms: 4, maxReleased: 1 });
    for (const id of ["a", "b", "c"]) {
      t.open(id);
      t.release(id);
    }
    t.release("c"); // idempotent: not counted twice
    t.open("d");
    expect(t.counts()).toEqual({ active: 1, terminated: 3 });
  });
});
