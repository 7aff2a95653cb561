import { describe, expect, it } from "vitest";
import { estimatorContract } from "./estimator.contract.js";
import { createEstimator, ESTIMATOR_NAMES } from "./registry.js";

describe("estimator registry", () => {
  it("registers every estimator of docs/references.md §C2–§C3", () => {
    expect([...ESTIMATOR_NAMES].sort()).toEqual(["chunked-mdp", "cispo", "dapo", "dr-grpo", "grpo", "gspo", "reward-to-go"]);
  });
  it("passes options through and names the known estimators for an unknown one", () => {
    expect(createEstimator("dapo", { epsHigh: 0.3 }).loss.epsHigh).toBe(0.3);
    expect(() => createEstimator("ppo")).toThrow(/unknown estimator 'ppo' \(known: grpo, dr-grpo, dapo/);
    expect(() => createEstimator("toString")).toThrow(/unknown estimator 'toString'/);
  });
  it("names an option the estimator does not take (a misspelling), and one that is not a number", () => {
    expect(() => createEstimator("grpo", { positivOnly: true })).toThrow(
      "train.estimatorOptions.positivOnly: not an option of estimator 'grpo' (its own: clip, clipRatioC, eps; every estimator's: negativeAdvantageScale, negativeAdvantageFloor, zeroAdvantageUnsolvedGroups, positiveOnly)",
    );
    expect(() => createEstimator("gspo", { clip: 0.2 })).toThrow(/estimatorOptions\.clip: not an option of estimator 'gspo' \(its own: eps, epsHigh, epsLow;/);
    expect(() => createEstimator("dapo", { epsHigh: "0.3" })).toThrow('train.estimatorOptions.epsHigh: must be a finite number, got "0.3"');
    expect(() => createEstimator("grpo", { eps: null })).toThrow("train.estimatorOptions.eps: must be a finite number, got null");
    // The shaping options every estimator takes pass, as does each estimator's own list.
    expect(createEstimator("grpo", { positiveOnly: true, clip: 0.1 }).loss.epsHigh).toBe(0.1);
  });
});

for (const name of ESTIMATOR_NAMES) estimatorContract(name, () => createEstimator(name, name === "dapo" ? { maxTokens: 3, overlongCache: 1 } : {}));
