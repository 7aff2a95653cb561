import { describe, expect, it } from "vitest";
import type { Termination } from "../core/types.js";
import { composeRewards } from "./compose.js";
import { createCompletionTimeReward } from "./completion-time.js";
import { createOutcomeReward } from "./outcome.js";
import type { RewardContext } from "./reward-fn.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";

/** A program that ran from `start` to `end` with calls starting at `callStarts`. */
function program(id: string, answer: string, start: number, end: number, callStarts: number[], kind: Termination["kind"] = "completed"): RewardContext {
  const t = trajectory(callStarts.map((_, i) => (i === callStarts.length - 1 ? answer : "thinking")), { kind });
  t.program.id = id;
  t.program.createdAt = start;
  t.program.endedAt = end;
  t.calls.forEach((c, i) => (c.timings = { start: callStarts[i] as number, end: (callStarts[i] as number) + 1 }));
  return ctx(t);
}

describe("completion-time reward", () => {
  const time = createCompletionTimeReward();
  it("rewards programs faster than their successful siblings, wall time including tools", async () => {
    // Successful wall times 100, 300 (mean 200); the wrong and the crashed ones do not compete.
    const group = [
      program("fast", "42", 0, 100, [0, 40]),
      program("slow", "42", 0, 300, [0, 250]),
      program("wrong", "41", 0, 10, [0]),
      program("crashed", "42", 0, 5, [0], "tool_crash"),
    ];
    const rewards = await composeRewards([{ fn: time, weight: 1 }]).computeGroup(group);
    expect(rewards.map((r) => r.components["completion-time"])).toEqual([0.5, -0.5, 0, 0]);
  });
  it("splits the value over calls as 1/K − τ_p/T̄, summing to the value", () => {
    const group = [program("a", "42", 0, 100, [0, 40]), program("b", "42", 0, 300, [0, 250])];
    const withGroup = { ...group[0]!, group };
    const r = time.compute(withGroup);
    // τ = [40, 60], T̄ = 200: steps 0.5 − 0.2, 0.5 − 0.3.
    expect(r.steps[0]).toBeCloseTo(0.3);
    expect(r.steps[1]).toBeCloseTo(0.2);
    expect(r.value).toBeCloseTo(0.5);
  });
  it("clamps to [-1, 1] and is 0 without a rival", async () => {
    const slowest = [program("a", "42", 0, 10, [0]), program("b", "42", 0, 10, [0]), program("c", "42", 0, 1000, [0])];
    const r = await composeRewards([{ fn: time, weight: 1 }]).computeGroup(slowest);
    expect(r[2]!.components["completion-time"]).toBe(-1);
    const alone = await composeRewards([{ fn: time, weight: 1 }]).computeGroup([program("a", "42", 0, 10, [0])]);
    expect(alone[0]!.components["completion-time"]).toBe(0);
  });
  it("needs the group: the per-program path refuses it by name", () => {
    const c = program("a", "42", 0, 10, [0]);
    expect(() => time.compute(c)).toThrow(/completion-time: program 'a' has no group/);
    const composed = composeRewards([{ fn: createOutcomeReward(), weight: 1 }, { fn: time, weight: 1 }]);
    expect(composed.needsGroup).toBe(true);
    expect(() => composed.compute(c)).toThrow("reward.completion-time: is relative to the program's group; compute rewards per group with computeGroup()");
  });
});
