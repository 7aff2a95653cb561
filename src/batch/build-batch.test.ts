import { describe, expect, it } from "vitest";
import { buildTrainingBatch } from "./build-batch.js";
import { referenceLoss } from "./estimators/loss-spec.js";
import { unpackSamples } from "./tree/build-tree.js";
import { syntheticSweBatch } from "./tree/synthetic.js";

describe("buildTrainingBatch", () => {
  it("runs trajectories through samples, the estimator and the tree", () => {
    const { trajectories, groups } = syntheticSweBatch({ seed: 2, tasks: 2, turns: [2, 4], systemTokens: 50, taskTokens: [10, 20], toolTokens: [5, 10] });
    const built = buildTrainingBatch({ id: "b", trajectories, groups, estimator: "dapo" });
    expect(built.batch.loss.epsHigh).toBe(0.28);
    const droppedIds = new Set(built.dropped.map((d) => d.groupId));
    expect(built.batch.samples).toHaveLength(groups.filter((g) => !droppedIds.has(g.id)).length * 8);
    expect(built.batch.programs?.every((p) => !droppedIds.has(p.groupId))).toBe(true);
    expect(built.batch.programs).toHaveLength(built.batch.samples.length);
    expect(unpackSamples(built.tree.tree)).toEqual(built.batch.samples.map((s) => s.tokenIds));
    expect(() => buildTrainingBatch({ id: "b", trajectories, groups, estimator: "nope" })).toThrow(/unknown estimator 'nope'/);
  });
});

/** A stand-in for the new policy: a deterministic logprob of `target` after `context`. */
function fakeLogprob(context: readonly number[], target: number): number {
  let h = target;
  for (const c of context) h = (h * 31 + c) % 10007;
  return -0.01 - (h % 101) / 50;
}

describe("merged multi-call samples", () => {
  it("give the same token-level loss as per-call samples (each output token sees the same context either way)", () => {
    const { trajectories, groups } = syntheticSweBatch({ seed: 9, tasks: 2, turns: [2, 5], systemTokens: 30, taskTokens: [5, 15], outputTokens: [2, 8], toolTokens: [3, 9], resetProbability: 0.3 });
    for (const estimator of ["dapo", "cispo", "reward-to-go"]) {
      const losses = (["per-call", "merged"] as const).map((mode) => {
        const { batch } = buildTrainingBatch({ id: mode, trajectories, groups, estimator, mode });
        const input = { logprob: [] as number[], oldLogprob: [] as number[], advantage: [] as number[], weight: [] as number[], unit: [] as number[] };
        for (const s of batch.samples) {
          s.lossMask.forEach((m, i) => {
            if (!m) return;
            input.logprob.push(fakeLogprob(s.tokenIds.slice(0, i), s.tokenIds[i]!));
            input.oldLogprob.push(s.oldLogprobs[i]!);
            input.advantage.push(s.advantages[i]!);
            input.weight.push(s.weights[i]!);
            input.unit.push(input.unit.length);
          });
        }
        expect(batch.loss.normaliser).toBe("token-mean");
        return { loss: referenceLoss(batch.loss, input).loss, terms: input.unit.length, samples: batch.samples.length };
      });
      expect(losses[1]!.samples).toBeLessThan(losses[0]!.samples);
      expect(losses[1]!.terms).toBe(losses[0]!.terms);
      expect(losses[1]!.loss).toBeCloseTo(losses[0]!.loss, 12);
    }
  });
});
