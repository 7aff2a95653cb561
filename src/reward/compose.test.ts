import { describe, expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import { composeRewards } from "./compose.js";
import { createOutcomeReward } from "./outcome.js";
import type { RewardFn } from "./reward-fn.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";

describe("composeRewards", () => {
  const constant = (name: string, v: number): RewardFn => ({ name, compute: () => v });
  it("sums weighted components and stores them unweighted", () => {
    const r = composeRewards([
      { fn: createOutcomeReward(), weight: 2 },
      { fn: constant("length_penalty", -0.25), weight: 0.5 },
    ]);
    expect(r.names).toEqual(["outcome", "length_penalty"]);
    expect(r.compute(ctx(trajectory(["42"], { kind: "completed" })))).toEqual({
      total: 2 * 1 + 0.5 * -0.25,
      components: { outcome: 1, length_penalty: -0.25 },
    });
    expect(r.compute(ctx(trajectory(["42"], { kind: "timeout" })))).toEqual({
      total: -0.125,
      components: { outcome: 0, length_penalty: -0.25 },
    });
  });
  it("rejects empty lists, duplicates, bad weights and bad component values", () => {
    expect(() => composeRewards([])).toThrow(ArborError);
    const twice = [
      { fn: constant("a", 1), weight: 1 },
      { fn: constant("a", 2), weight: 1 },
    ];
    expect(() => composeRewards(twice)).toThrow("reward.a: listed twice");
    expect(() => composeRewards([{ fn: constant("a", 1), weight: Infinity }])).toThrow(/reward.a: weight must be a finite number/);
    const bad = composeRewards([{ fn: constant("a", NaN), weight: 1 }]);
    expect(() => bad.compute(ctx(trajectory([])))).toThrow("reward.a: returned NaN for program 'p'");
  });
});
