import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { createRewardFn, createRewardFromConfig } from "./registry.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";

const engines = [{ name: "e0" }];

describe("reward registry", () => {
  it("creates the outcome reward by name and from config weights", () => {
    expect(createRewardFn("outcome").name).toBe("outcome");
    const r = createRewardFromConfig({ outcome: 1 });
    expect(r.compute(ctx(trajectory(["42"], { kind: "completed" })))).toEqual({ total: 1, components: { outcome: 1 } });
  });
  it("names unknown reward functions", () => {
    expect(() => createRewardFn("bleu")).toThrow("reward: unknown reward function 'bleu' (known: outcome, process, completion-time, judge)");
    expect(() => createRewardFn("constructor")).toThrow(/unknown reward function/);
    expect(() => createRewardFromConfig({ outcome: 1, nope: 1 })).toThrow(/'nope'/);
    expect(() => createRewardFromConfig({ outcome: "1" })).toThrow('reward.outcome: weight must be a number, got "1"');
  });
  it("builds the composition a run config describes, options and step rewards included", () => {
    const cfg = parseRunConfig({ engines, reward: { outcome: 1, process: 0.5, stepRewards: true, options: { process: { malformedToolCall: 0.2 } } } });
    const r = createRewardFromConfig(cfg.reward);
    expect(r.names).toEqual(["outcome", "process"]);
    const got = r.compute(ctx(trajectory(["<|tool_call|>calc", "42"], { kind: "completed" })));
    expect(got.components).toEqual({ outcome: 1, process: -0.2, "step:0": -0.1, "step:1": 1 });
    expect(got.total).toBeCloseTo(0.9);
    // The default config is the outcome reward alone.
    expect(createRewardFromConfig(parseRunConfig({ engines }).reward).names).toEqual(["outcome"]);
  });
  it("needs a judge model in config and a way to reach it at run time", () => {
    expect(() => parseRunConfig({ engines, reward: { judge: 1 } })).toThrow("reward.options.judge: the judge reward needs options.judge.model");
    const cfg = parseRunConfig({ engines, reward: { judge: 1, options: { judge: { model: "m" } } } });
    expect(() => createRewardFromConfig(cfg.reward)).toThrow("reward.judge: needs a gateway to reach the judge model (none was given)");
    const r = createRewardFromConfig(cfg.reward, { judgeChat: async () => "SCORE: 7" });
    expect(r.isAsync).toBe(true);
    expect(() => parseRunConfig({ engines, reward: { options: { process: { floor: 1 } } } })).toThrow(/reward.options.process.floor/);
  });
});
