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
  });
});

for (const name of ESTIMATOR_NAMES) estimatorContract(name, () => createEstimator(name, name === "dapo" ? { maxTokens: 3, overlongCache: 1 } : {}));
