import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { ProgramTable } from "./program-table.js";

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof ArborError ? e.code : "not-arbor";
  }
  return undefined;
}

describe("ProgramTable", () => {
  it("tracks calls, phase, context tokens, backend and activity time", () => {
    const clock = new VirtualClock(100);
    const t = new ProgramTable({ clock, maxPrograms: 4 });
    expect(t.open("p1")).toMatchObject({ state: "active", calls: 0, phase: "acting", backend: null, openedAt: 100 });
    clock.advance(5);
    expect(t.beginCall("p1")).toBe(0);
    t.bind("p1", "e0");
    expect(t.get("p1")).toMatchObject({ phase: "reasoning", inFlight: 1, backend: "e0", lastActivity: 105 });
    clock.advance(10);
    t.endCall("p1", 42);
    expect(t.get("p1")).toMatchObject({ phase: "acting", inFlight: 0, calls: 1, contextTokens: 42, lastActivity: 115 });
    expect(t.beginCall("p1")).toBe(1);
    t.endCall("p1", 80);
    expect(t.get("p1")?.contextTokens).toBe(80);
    expect(t.open("p1").calls).toBe(2); // open is idempotent for an active program
  });

  it("hands a failed call's index out again and goes back to acting", () => {
    const t = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 2 });
    t.open("p");
    expect(t.beginCall("p")).toBe(0);
    t.failCall("p", 0);
    expect(t.get("p")).toMatchObject({ phase: "acting", inFlight: 0, calls: 0 });
    expect(t.beginCall("p")).toBe(0);
    // Two concurrent calls: the earlier one failing cannot give its index back.
    expect(t.beginCall("p")).toBe(1);
    t.failCall("p", 0);
    expect(t.get("p")?.phase).toBe("reasoning");
    t.endCall("p", 10);
    expect(t.beginCall("p")).toBe(2);
  });

  it("rejects calls after release, with a 409-class error, and release is idempotent", () => {
    const clock = new VirtualClock(7);
    const t = new ProgramTable({ clock, maxPrograms: 2 });
    t.open("p");
    t.beginCall("p");
    t.endCall("p", 3);
    const summary = t.release("p");
    expect(summary).toMatchObject({ id: "p", state: "terminated", calls: 1, releasedAt: 7 });
    expect(t.release("p")).toEqual(summary);
    expect(codeOf(() => t.open("p"))).toBe("program_released");
    expect(codeOf(() => t.beginCall("p"))).toBe("program_released");
    expect(() => t.open("p")).toThrow("program 'p' was released; it accepts no more calls");
    expect(codeOf(() => t.release("nobody"))).toBe("program_unknown");
    expect(codeOf(() => t.beginCall("never-opened"))).toBe("program_unknown");
    expect(t.size).toBe(0);
  });

  it("counts a call that was in flight at release but keeps the program terminated", () => {
    const t = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 2 });
    t.open("p");
    t.beginCall("p");
    expect(t.release("p").inFlight).toBe(1);
    t.endCall("p", 9);
    expect(t.get("p")).toMatchObject({ state: "terminated", calls: 1, inFlight: 0, phase: "acting" });
  });

  it("is bounded: capacity error at the limit, room again after release, tombstones bounded", () => {
    const t = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 2, maxReleased: 1 });
    t.open("a");
    t.open("b");
    expect(() => t.open("c")).toThrow("program table is full (limit 2)");
    expect(codeOf(() => t.open("c"))).toBe("capacity");
    t.release("a");
    t.open("c");
    t.release("b");
    // Only the newest released id is remembered.
    expect(t.get("a")).toBeUndefined();
    expect(t.get("b")?.state).toBe("terminated");
    expect(t.list().map((e) => e.id)).toEqual(["c"]);
  });

  it("validates ids and options", () => {
    const t = new ProgramTable({ clock: new VirtualClock(), maxPrograms: 1 });
    expect(codeOf(() => t.open(""))).toBe("invalid_request");
    expect(codeOf(() => t.open("has space"))).toBe("invalid_request");
    expect(codeOf(() => t.open("x".repeat(257)))).toBe("invalid_request");
    expect(() => new ProgramTable({ clock: new VirtualClock(), maxPrograms: 0 })).toThrow("maxPrograms: must be an integer >= 1");
  });
});
