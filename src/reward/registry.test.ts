import { describe, expect, it } from "vitest";
import { createRewardFn, createRewardFromConfig } from "./registry.js";
import { ctx, trajectory } from "./test-helpers.js";

describe("reward registry", () => {
  it("creates the outcome reward by name and from config weights", () => {
    expect(createRewardFn("outcome").name).toBe("outcome");
    const r = createRewardFromConfig({ outcome: 1 });
    expect(r.compute(ctx(trajectory(["42"], { kind: "completed" })))).toEqual({ total: 1, components: { outcome: 1 } });
  });
  it("names unknown reward functions", () => {
    expect(() => createRewardFn("judge")).toThrow("reward: unknown reward function 'judge' (known: outcome)");
    expect(() => createRewardFn("constructor")).toThrow(/unknown reward function/);
    expect(() => createRewardFromConfig({ outcome: 1, nope: 1 })).toThrow(/'nope'/);
  });
});
