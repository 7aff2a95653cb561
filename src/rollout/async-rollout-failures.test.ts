// The rollout when a program has no outcome (its runner threw: the gateway could not end it, a remote program's
// publish failed): the rollout stops with that failure, and its siblings waiting for their group's reward (a reward
// computed over the whole group) stop waiting, so finish() returns and the run is finished in the store.
import { describe, expect, it } from "vitest";
import { realClock } from "../core/real-clock.js";
import { Rng } from "../core/rng.js";
import type { Group } from "../core/types.js";
import { createCalcEnvironment } from "../envs/calc/calc.js";
import { composeRewards } from "../reward/compose.js";
import { createCompletionTimeReward } from "../reward/completion-time.js";
import { GroupRewarder } from "../reward/group-rewarder.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { OrchestratedRollout } from "./async-rollout.js";
import type { EndedProgram, ProgramRunner } from "./sync-rollout.js";

describe("OrchestratedRollout when a program of a group-rewarded group has no outcome", () => {
  it("stops with that program's failure; its sibling stops waiting for the group's reward and the run is finished", async () => {
    const store = new SqliteTrajectoryStore(":memory:");
    const env = createCalcEnvironment();
    const tasks = env.tasks(1, 5).slice(0, 1);
    const runner: ProgramRunner = {
      async run(o, task, group: Group, programId, sampleIndex): Promise<EndedProgram> {
        await store.createProgram({ id: programId, runId: o.runId, taskId: task.id, groupId: group.id, sampleIndex, state: "active", createdAt: 0 });
        // The sibling ends first and waits for the group; then this one fails.
        if (sampleIndex === 1) {
          await new Promise((r) => setTimeout(r, 50));
          throw new Error("gateway could not end program: 500 record_failed");
        }
        await store.endProgram(programId, { kind: "completed" }, 1);
        const trajectory = (await store.getTrajectory(programId)) as NonNullable<Awaited<ReturnType<typeof store.getTrajectory>>>;
        return { result: { programId, groupId: group.id, termination: { kind: "completed" }, calls: 0 }, ctx: { trajectory, task, env, finalAnswer: "" }, zeroReward: false };
      },
    };
    const rewarder = new GroupRewarder(composeRewards([{ fn: createCompletionTimeReward(), weight: 1 }]));
    const rollout = new OrchestratedRollout({
      runId: "r",
      env,
      tasks,
      store,
      gatewayUrl: "http://127.0.0.1:9",
      model: "m",
      limits: { maxTurns: 1, maxTokensPerCall: 8, maxTotalTokens: 8 },
      temperature: 1,
      seed: 1,
      clock: realClock,
      concurrency: 4,
      programs: runner,
      settings: { mode: "sync", groupSize: 2, batchGroups: 1 },
      rng: new Rng(1),
      engines: [{ name: "e", maxActive: 4, kvCapacityTokens: 1 << 20 }],
      run: { name: "r", configJson: "{}" },
      reward: (group, ctx) => rewarder.add(group, ctx),
    });
    try {
      expect(await rollout.next()).toBeUndefined();
      await expect(rollout.finish("aborted")).rejects.toThrow("gateway could not end program: 500 record_failed");
      const sibling = await store.getTrajectory("r/g0/s0");
      expect(sibling?.program.termination).toEqual({ kind: "completed" });
      expect(sibling?.reward).toBeUndefined();
      expect((await store.getRun("r"))?.endedAt).toBeDefined();
    } finally {
      await store.close();
    }
  });
});
