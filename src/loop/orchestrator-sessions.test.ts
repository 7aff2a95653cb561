import { describe, expect, it } from "vitest";
import { OrchestratorSessions } from "./orchestrator-sessions.js";

describe("OrchestratorSessions", () => {
  it("supersedes each orchestrator by the next to start, not the current or unknown ones", () => {
    const s = new OrchestratorSessions();
    s.started("a");
    expect(s.isSuperseded("a")).toBe(false);
    s.started("b");
    s.started("b"); // its own start replayed: nothing changes
    expect([s.isSuperseded("a"), s.isSuperseded("b"), s.isSuperseded("x"), s.isSuperseded(undefined)]).toEqual([true, false, false, false]);
  });

  it("remembers only the last `limit` superseded sessions", () => {
    const s = new OrchestratorSessions(2);
    for (const id of ["a", "b", "c", "d"]) s.started(id);
    expect(["a", "b", "c", "d"].map((id) => s.isSuperseded(id))).toEqual([false, true, true, false]);
  });
});
