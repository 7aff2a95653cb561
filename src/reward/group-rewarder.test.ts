import { describe, expect, it } from "vitest";
import { CapacityError } from "../core/errors.js";
import { composeRewards } from "./compose.js";
import { createCompletionTimeReward } from "./completion-time.js";
import { GroupRewarder } from "./group-rewarder.js";
import { createOutcomeReward } from "./outcome.js";
import type { RewardContext } from "./reward-fn.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";

function ended(id: string, answer: string, wallMs: number): RewardContext {
  const t = trajectory([answer], { kind: "completed" });
  t.program.id = id;
  t.program.endedAt = wallMs;
  return ctx(t);
}
const group = { id: "g", programIds: ["a", "b"] };
const timed = composeRewards([{ fn: createOutcomeReward(), weight: 1 }, { fn: createCompletionTimeReward(), weight: 1 }]);

describe("GroupRewarder", () => {
  it("rewards a group once its last program has ended, in any order", async () => {
    const r = new GroupRewarder(timed);
    let settled = false;
    const b = r.add(group, ended("b", "42", 300)).then((x) => ((settled = true), x));
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(r.pendingGroups).toBe(1);
    const a = r.add(group, ended("a", "42", 100));
    expect(await a).toEqual({ total: 1.5, components: { outcome: 1, "completion-time": 0.5 } });
    expect(await b).toEqual({ total: 0.5, components: { outcome: 1, "completion-time": -0.5 } });
    expect(r.pendingGroups).toBe(0);
  });
  it("rewards at once when nothing needs the group", async () => {
    const r = new GroupRewarder(composeRewards([{ fn: createOutcomeReward(), weight: 1 }]));
    expect(await r.add(group, ended("a", "42", 1))).toEqual({ total: 1, components: { outcome: 1 } });
    expect(r.pendingGroups).toBe(0);
  });
  it("refuses strangers, duplicates and too many waiting groups; a failing group rejects every program", async () => {
    const r = new GroupRewarder(timed, 1);
    await expect(r.add(group, ended("z", "42", 1))).rejects.toThrow("reward: program 'z' is not in group 'g'");
    void r.add(group, ended("a", "42", 1));
    await expect(r.add(group, ended("a", "42", 1))).rejects.toThrow("reward: program 'a' of group 'g' added twice");
    await expect(r.add({ id: "h", programIds: ["c"] }, ended("c", "42", 1))).rejects.toBeInstanceOf(CapacityError);
    const broken = ended("b", "42", 1);
    delete broken.trajectory.program.endedAt;
    const fresh = new GroupRewarder(timed);
    const pa = fresh.add(group, ended("a", "42", 1));
    const pb = fresh.add(group, broken);
    await expect(pa).rejects.toThrow("reward.completion-time: program 'b' has not ended");
    await expect(pb).rejects.toThrow("reward.completion-time: program 'b' has not ended");
  });
});
