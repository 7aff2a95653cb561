// A composed group reward goes into the real SQLite store and comes back with every component
// (outcome, process, completion time, per-step shares) beside the total, ready for the batch builder.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildSampleSet } from "../batch/trajectory-samples.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram, fixtureRun } from "../testing/store-fixtures.js";
import { finalAnswer } from "../testing/final-answer.js";
import { createRewardFromConfig } from "./registry.js";
import { fakeEnv, task } from "../testing/reward-helpers.js";

describe("rewards in the trajectory store", () => {
  it("keeps each component beside the total, and the batch builder reads the step rewards", async () => {
    const store = new SqliteTrajectoryStore(join(mkdtempSync(join(tmpdir(), "arbor-reward-store-")), "s.sqlite"));
    try {
      await store.createRun(fixtureRun());
      const group = fixtureGroup("g", "run-1", 2);
      await store.createGroup(group);
      const env = fakeEnv();
      const ctxs = [];
      for (let i = 0; i < 2; i++) {
        const p = fixtureProgram(group, i);
        await store.createProgram(p);
        await store.recordCall({ ...fixtureCall(p.id, 0, [-0.1, -0.2]), outputText: i === 0 ? "<|tool_call|>calc 6*" : "thinking" });
        await store.recordCall({ ...fixtureCall(p.id, 1, [-0.3]), outputText: "42" });
        await store.endProgram(p.id, { kind: "completed" }, p.createdAt + (i === 0 ? 100 : 300));
        const t = (await store.getTrajectory(p.id))!;
        const answer = finalAnswer(t);
        ctxs.push({ trajectory: t, task, env, finalAnswer: answer, check: env.checkNow(task, answer) });
      }
      const reward = createRewardFromConfig({ outcome: 1, process: 0.5, "completion-time": 0.2, stepRewards: true });
      const rewards = await reward.computeGroup(ctxs);
      rewards.forEach((r, i) => store.setReward(group.programIds[i]!, r));

      const back = (await store.listTrajectories("run-1")).sort((a, b) => a.program.sampleIndex - b.program.sampleIndex);
      expect(back.map((t) => t.reward)).toEqual(rewards);
      const r0 = back[0]!.reward!;
      expect(Object.keys(r0.components).sort()).toEqual(["completion-time", "outcome", "process", "step:0", "step:1"]);
      expect(r0.components.outcome).toBe(1);
      expect(r0.components.process).toBe(-0.5);
      expect(r0.components["completion-time"]).toBe(0.5);
      expect(r0.total).toBeCloseTo(1 - 0.25 + 0.1);
      const { programs } = buildSampleSet(back, await store.listGroups("run-1"));
      const steps = programs.find((p) => p.programId === group.programIds[0])!.stepRewards!;
      expect(steps[0]! + steps[1]!).toBeCloseTo(r0.total);
    } finally {
      await store.close();
    }
  });
});
