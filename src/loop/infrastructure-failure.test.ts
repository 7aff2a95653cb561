import { describe, expect, it } from "vitest";
import type { Termination, Trajectory } from "../core/types.js";
import { fixtureGroup, fixtureProgram } from "../testing/store-fixtures.js";
import { infrastructureFailure } from "./infrastructure-failure.js";

const group = fixtureGroup("g", "run-1", 4);
const ended = (i: number, termination: Termination): Trajectory => ({ program: { ...fixtureProgram(group, i), state: "terminated", termination }, calls: [], tools: [] });
const sandbox = (i: number): Trajectory => ended(i, { kind: "sandbox_error", detail: "cannot start a container: connect ENOENT /var/run/docker.sock" });

describe("infrastructureFailure", () => {
  it("stops a batch whose every program the sandbox failed, naming the kinds and the first program's detail", () => {
    const e = infrastructureFailure(2, [sandbox(0), sandbox(1), sandbox(2), ended(3, { kind: "sandbox_oom" })]);
    expect(e?.code).toBe("rollout_failed");
    expect(e?.message).toBe(
      "iteration 2: all 4 programs ended in sandbox failures (sandbox_error 3, sandbox_oom 1), none by the policy's doing, " +
        "so there is nothing to learn from; the first, g-p0: cannot start a container: connect ENOENT /var/run/docker.sock",
    );
  });

  it("lets a batch through where one program ended otherwise (by the policy, an engine error a restart causes, or not ended), and an empty one", () => {
    const others = [ended(3, { kind: "completed" }), ended(3, { kind: "max_turns" }), ended(3, { kind: "timeout" }), ended(3, { kind: "engine_error" }), { ...sandbox(3), program: fixtureProgram(group, 3) }];
    for (const other of others) {
      expect(infrastructureFailure(1, [sandbox(0), sandbox(1), sandbox(2), other])).toBeUndefined();
    }
    expect(infrastructureFailure(1, [])).toBeUndefined();
  });
});
