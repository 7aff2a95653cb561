// runTrainLoop's time accounting on a virtual clock, with a scripted rollout, trainer, weight sync and
// evaluation (each moves the clock by its own amount): the training step and the evaluation each get their
// own time, and a rollout's wall time runs from its weights being served, the evaluation beside it included
// (on the real stack the orchestrator admits the next programs as soon as the weights are published).
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import type { RolloutEnd, TakenBatch } from "../rollout/async-rollout.js";
import { oneCallGroup, oneCallTrajectory } from "../testing/one-call-trajectory.js";
import type { HeldOutScore } from "./held-out-eval.js";
import { runTrainLoop, type RolloutSource } from "./train-loop.js";
import type { Trainer } from "./trainer-port.js";

const ROLLOUT_MS = 1000;
const TRAIN_MS = 200;
const SYNC_MS = 50;
const EVAL_MS = 3000;

/** A batch of one group of two one-call programs, rewards 1 and 0 (an advantage to step on). */
function taken(k: number, version: number): TakenBatch {
  const g = `g${k}`;
  return {
    id: `r-it${k}`,
    batch: { index: k, version, groups: [], tokens: 6, meanStaleness: 0, maxStaleness: 0 },
    groups: [oneCallGroup(g, 2)],
    trajectories: [oneCallTrajectory(g, 0, [50, 51, 2], 1), oneCallTrajectory(g, 1, [52, 53, 2], 0)],
  };
}

function score(version: number): HeldOutScore {
  return { version, solved: { mean: 0.5, se: 0.1, n: 4 }, baseVersion: 0, tasks: 4, samples: 1, temperature: 1 };
}

describe("runTrainLoop time accounting", () => {
  it("charges the held-out evaluation to evalMs, not to the training step, and to the rollout it runs beside", async () => {
    const clock = new VirtualClock(0);
    let version = 0;
    let k = 0;
    const source: RolloutSource = {
      next: async () => {
        clock.advance(ROLLOUT_MS);
        k++;
        return taken(k, version);
      },
      beginSync: () => true,
      published: () => undefined,
      skipped: () => undefined,
      finish: async (why) => ({ stoppedBy: why === "aborted" ? "aborted" : "steps", results: [], unconsumedGroups: [], finalVersion: version, invertedTokens: 0, unreportedTokens: 0 }) as RolloutEnd,
    };
    const trainer: Trainer = {
      kind: "reference",
      get version() {
        return version;
      },
      step: async (built) => {
        clock.advance(TRAIN_MS);
        version++;
        const n = built.batch.samples.length;
        return { stepped: true, version, checkpoint: `v${version}.gguf`, loss: 0, gradNorm: 0, clipFraction: 0, kl: 0, entropy: NaN, samples: n, trainedSamples: n, treeTokens: 0, flatTokens: 0, droppedGroups: 0 };
      },
      close: async () => {},
    };
    const evaluated: number[] = [];
    const out = await runTrainLoop({
      rollout: source,
      steps: 3,
      estimator: "grpo",
      trainer,
      weights: { load: async () => clock.advance(SYNC_MS) },
      exportBatch: async (step) => `b${step}.jsonl`,
      // Steps 0 (the start) and 2 only, as `eval.every: 2` would.
      evaluate: async (step, v) => {
        if (step % 2 !== 0) return undefined;
        evaluated.push(step);
        clock.advance(EVAL_MS);
        return score(v);
      },
      clock,
    });
    expect(evaluated).toEqual([0, 2]);
    expect(out.iterations.map((r) => [r.iteration, r.rolloutMs, r.trainMs, r.evalMs, r.heldOut?.version])).toEqual([
      // Step 1's rollout runs beside the starting policy's evaluation, step 3's beside step 2's.
      [1, EVAL_MS + ROLLOUT_MS, TRAIN_MS + SYNC_MS, undefined, undefined],
      [2, ROLLOUT_MS, TRAIN_MS + SYNC_MS, EVAL_MS, 2],
      [3, EVAL_MS + ROLLOUT_MS, TRAIN_MS + SYNC_MS, undefined, undefined],
    ]);
    expect(out.rolloutMs).toBe(2 * EVAL_MS + 3 * (ROLLOUT_MS + TRAIN_MS + SYNC_MS));
  });
});
