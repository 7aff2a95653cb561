// The loop stops a run whose batches the infrastructure failed (infrastructure-failure.ts): here a rollout whose
// every program an engine fails, as an engine that cannot serve the model fails them, one batch after another.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import type { Trajectory } from "../core/types.js";
import type { TakenBatch } from "../rollout/async-rollout.js";
import { fixtureGroup, fixtureProgram } from "../testing/store-fixtures.js";
import { ENGINE_FAILURE_ITERATIONS } from "./infrastructure-failure.js";
import { runTrainLoop, type RolloutSource } from "./train-loop.js";

/** A rollout whose every batch's programs ended engine_error; it counts the batches taken and how it was finished. */
function failingRollout(): RolloutSource & { taken: number; finishedAs?: string } {
  const source = {
    taken: 0,
    finishedAs: undefined as string | undefined,
    next: (): Promise<TakenBatch> => {
      source.taken++;
      const group = fixtureGroup(`g${source.taken}`, "run-1", 2);
      const trajectories: Trajectory[] = [0, 1].map((i) => ({
        program: { ...fixtureProgram(group, i), state: "terminated", termination: { kind: "engine_error", detail: "backend 'e0' answered 404" } },
        calls: [],
        tools: [],
        reward: { total: 0, components: {} },
      }));
      return Promise.resolve({ id: `run-1-it${source.taken}`, batch: { index: source.taken, version: 0, groups: [], tokens: 0, meanStaleness: 0, maxStaleness: 0 }, groups: [group], trajectories });
    },
    beginSync: () => false,
    published: () => {},
    skipped: () => {},
    finish: (why: string) => {
      source.finishedAs = why;
      return Promise.resolve({ stoppedBy: why, results: [], unconsumedGroups: [], finalVersion: 0 } as never);
    },
  };
  return source;
}

describe("runTrainLoop over batches an engine failed", () => {
  it("rides out the first ones and stops the run at the third, the rollout finished as aborted", async () => {
    const rollout = failingRollout();
    const exported: number[] = [];
    const run = runTrainLoop({ rollout, steps: 10, estimator: "grpo", weights: { load: () => Promise.resolve() }, clock: new VirtualClock(), exportBatch: (step) => (exported.push(step), Promise.resolve(`b${step}`)) });
    await expect(run).rejects.toMatchObject({ code: "rollout_failed", message: expect.stringMatching(/^iteration 3: all programs of the last 3 iterations ended in engine or sandbox failures/) });
    expect(rollout.taken).toBe(ENGINE_FAILURE_ITERATIONS);
    expect(exported).toEqual([1, 2]);
    expect(rollout.finishedAs).toBe("aborted");
  });
});
