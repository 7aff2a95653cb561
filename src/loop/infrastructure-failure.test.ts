import { describe, expect, it } from "vitest";
import type { Termination, Trajectory } from "../core/types.js";
import { fixtureGroup, fixtureProgram } from "../testing/store-fixtures.js";
import { ENGINE_FAILURE_ITERATIONS, InfrastructureWatch } from "./infrastructure-failure.js";

const group = fixtureGroup("g", "run-1", 4);
const ended = (i: number, termination: Termination): Trajectory => ({ program: { ...fixtureProgram(group, i), state: "terminated", termination }, calls: [], tools: [] });
const sandbox = (i: number): Trajectory => ended(i, { kind: "sandbox_error", detail: "cannot start a container: connect ENOENT /var/run/docker.sock" });
const engine = (i: number): Trajectory => ended(i, { kind: "engine_error", detail: "backend 'e0' answered 404: model 'm' not found" });

describe("InfrastructureWatch", () => {
  it("stops a batch whose every program the sandbox failed, naming the kinds and the first program's detail", () => {
    const e = new InfrastructureWatch().check(2, [sandbox(0), sandbox(1), sandbox(2), ended(3, { kind: "sandbox_oom" })]);
    expect(e?.code).toBe("rollout_failed");
    expect(e?.message).toBe(
      "iteration 2: all 4 programs ended in sandbox failures (sandbox_error 3, sandbox_oom 1), none by the policy's doing, " +
        "so there is nothing to learn from; the first, g-p0: cannot start a container: connect ENOENT /var/run/docker.sock",
    );
  });

  it("lets a batch through where one program ended otherwise (by the policy, or not ended), and an empty one", () => {
    const others = [ended(3, { kind: "completed" }), ended(3, { kind: "max_turns" }), ended(3, { kind: "timeout" }), { ...sandbox(3), program: fixtureProgram(group, 3) }];
    for (const other of others) {
      expect(new InfrastructureWatch().check(1, [sandbox(0), sandbox(1), sandbox(2), other])).toBeUndefined();
    }
    expect(new InfrastructureWatch().check(1, [])).toBeUndefined();
  });

  it("rides out batches an engine failed (a restart) and stops at the third in a row, counting this one's kinds", () => {
    const watch = new InfrastructureWatch();
    const failedBatch = [engine(0), engine(1), sandbox(2), engine(3)];
    expect(ENGINE_FAILURE_ITERATIONS).toBe(3);
    expect(watch.check(1, failedBatch)).toBeUndefined();
    expect(watch.check(2, failedBatch)).toBeUndefined();
    const e = watch.check(3, failedBatch);
    expect(e?.code).toBe("rollout_failed");
    expect(e?.message).toBe(
      "iteration 3: all programs of the last 3 iterations ended in engine or sandbox failures (this one: engine_error 3, sandbox_error 1), " +
        "none by the policy's doing, so there is nothing to learn from (is the engine serving the model?); the first, g-p0: backend 'e0' answered 404: model 'm' not found",
    );
  });

  it("starts counting again after a batch where one program ended by the policy", () => {
    const watch = new InfrastructureWatch(2);
    const failedBatch = [engine(0), engine(1)];
    expect(watch.check(1, failedBatch)).toBeUndefined();
    expect(watch.check(2, [engine(0), ended(1, { kind: "completed" })])).toBeUndefined();
    expect(watch.check(3, failedBatch)).toBeUndefined();
    expect(watch.check(4, failedBatch)?.message).toMatch(/^iteration 4: all programs of the last 2 iterations/);
  });
});
