// Reward-to-go per step (TECHNIQUES §E): the composition splits the weighted total over the calls as
// `step:<k>` components; the batch builder's reward-to-go turns them into Â_t = Σ_{p≥t} r_p − B.
import { describe, expect, it } from "vitest";
import { rewardsToGo } from "../batch/estimators/reward-to-go.js";
import { composeRewards } from "./compose.js";
import { createOutcomeReward } from "./outcome.js";
import { createProcessReward } from "./process.js";
import type { RewardFn } from "./reward-fn.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";

describe("step rewards", () => {
  const composed = composeRewards(
    [
      { fn: createOutcomeReward(), weight: 1 },
      { fn: createProcessReward({ malformedToolCall: 0.5 }), weight: 0.4 },
    ],
    { stepRewards: true },
  );
  it("credit plain values to the last call and stepwise ones per call; the steps sum to the total", () => {
    const t = trajectory(["<|tool_call|>calc 6*", "<|tool_call|>calc 6*7<|/tool_call|>", "42"], { kind: "completed" });
    const r = composed.compute(ctx(t));
    expect(r.components.outcome).toBe(1);
    expect(r.components.process).toBe(-0.5);
    expect(r.total).toBeCloseTo(0.8);
    expect(r.components["step:0"]).toBeCloseTo(-0.2);
    expect(r.components["step:1"]).toBe(0);
    expect(r.components["step:2"]).toBe(1);
  });
  it("give the §E advantages through the batch builder's reward-to-go", () => {
    const t = trajectory(["<|tool_call|>calc 6*", "<|tool_call|>calc 6*7<|/tool_call|>", "42"], { kind: "completed" });
    const r = composed.compute(ctx(t));
    const steps = [0, 1, 2].map((k) => r.components[`step:${k}`] as number);
    const rtg = rewardsToGo({ programId: "p", groupId: "g", reward: r.total, chunkCount: 3, chunkLengths: [1, 1, 1], stepRewards: steps }, 1);
    // Â_t + B = Σ_{p≥t} r_p: the malformed first call carries its penalty, later calls do not.
    expect(rtg[0]).toBeCloseTo(0.8);
    expect(rtg[1]).toBeCloseTo(1);
    expect(rtg[2]).toBeCloseTo(1);
  });
  it("move a text-only call's share to the next trainable call, and skip programs without calls", () => {
    const t = trajectory(["<|tool_call|>a", "<|tool_call|>b", "42"], { kind: "completed" });
    t.calls[0]!.trainable = false;
    const r = composed.compute(ctx(t));
    expect(Object.keys(r.components).filter((k) => k.startsWith("step:"))).toEqual(["step:0", "step:1"]);
    expect(r.components["step:0"]).toBeCloseTo(-0.4);
    expect(r.components["step:1"]).toBe(1);
    expect(composed.compute(ctx(trajectory([], { kind: "timeout" })))).toEqual({ total: 0, components: { outcome: 0, process: 0 } });
  });
  it("refuse a step split that does not add up", () => {
    const liar: RewardFn = { name: "liar", compute: () => ({ value: 1, steps: [0.25, 0.25] }) };
    const short: RewardFn = { name: "short", compute: () => ({ value: 1, steps: [1] }) };
    const t = trajectory(["a", "b"], { kind: "completed" });
    expect(() => composeRewards([{ fn: liar, weight: 1 }], { stepRewards: true }).compute(ctx(t))).toThrow("reward.liar: steps sum to 0.5 but the value is 1 for program 'p'");
    expect(() => composeRewards([{ fn: short, weight: 1 }], { stepRewards: true }).compute(ctx(t))).toThrow("reward.short: gave 1 steps for program 'p' with 2 calls");
    expect(() => composeRewards([{ fn: { name: "step:0", compute: () => 0 }, weight: 1 }])).toThrow(/'step:' prefix is reserved/);
  });
});
