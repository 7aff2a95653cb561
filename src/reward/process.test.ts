import { describe, expect, it } from "vitest";
import type { ToolEvent } from "../core/types.js";
import type { Tool } from "../envs/env.js";
import { createProcessReward, processCounts } from "./process.js";
import { ctx, fakeEnv, trajectory } from "../testing/reward-helpers.js";

const calcTool: Tool = { name: "calc", description: "", run: async () => ({ output: "", ok: true }) };
const env = { ...fakeEnv(), tools: () => [calcTool] };
const ev = (callIndex: number, tool: string, ok: boolean): ToolEvent => ({ programId: "p", callIndex, tool, input: "x", output: "o", ok, durationMs: 1 });

describe("process reward", () => {
  it("is 0 for a clean program", () => {
    const t = trajectory(["<|tool_call|>calc 6*7<|/tool_call|>", "Answer: 42"], { kind: "completed" });
    t.tools.push(ev(0, "calc", true));
    expect(createProcessReward().compute(ctx(t, env))).toEqual({ value: 0, steps: [0, 0] });
  });
  it("penalises malformed and failing tool calls and language mixing at the call that made them", () => {
    const t = trajectory(
      [
        "<|tool_call|>calc 6*", // unclosed: malformed
        "<|tool_call|>calc 6*7<|/tool_call|><|tool_call|>nope 1<|/tool_call|>", // a failing call and an unknown tool
        "Сначала I multiply six by seven, получаем Answer: 42", // mixed prose
      ],
      { kind: "completed" },
    );
    t.tools.push(ev(1, "calc", false), ev(1, "nope", false), ev(2, "arbor:hygiene_violation", false));
    expect(processCounts(ctx(t, env))).toEqual([
      { malformed: 1, failed: 0, mixedCalls: 0 },
      { malformed: 1, failed: 1, mixedCalls: 0 },
      { malformed: 0, failed: 0, mixedCalls: 1 },
    ]);
    const r = createProcessReward({ malformedToolCall: 0.2, failedToolCall: 0.1, languageMix: 0.3 }).compute(ctx(t, env));
    expect(r.value).toBeCloseTo(-0.8);
    expect(r.steps[0]).toBeCloseTo(-0.2);
    expect(r.steps[1]).toBeCloseTo(-0.3);
    expect(r.steps[2]).toBeCloseTo(-0.3);
  });
  it("floors the value and scales the steps to match", () => {
    const t = trajectory(["<|tool_call|>a", "<|tool_call|>b", "<|tool_call|>c"], { kind: "completed" });
    const r = createProcessReward({ malformedToolCall: 1, floor: -1.5 }).compute(ctx(t, env));
    expect(r.value).toBe(-1.5);
    expect(r.steps).toEqual([-0.5, -0.5, -0.5]);
  });
  it("rejects bad options", () => {
    expect(() => createProcessReward({ failedToolCall: -1 })).toThrow("reward.process: failedToolCall must be a finite number >= 0, got -1");
    expect(() => createProcessReward({ floor: 1 })).toThrow(/floor must be a finite number <= 0/);
  });
});
