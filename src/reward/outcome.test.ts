import { describe, expect, it } from "vitest";
import { createOutcomeReward } from "./outcome.js";
import { ctx, fakeEnv, trajectory } from "../testing/reward-helpers.js";

describe("outcome reward", () => {
  const outcome = createOutcomeReward();
  it("is the checker's score for a completed program", () => {
    expect(outcome.name).toBe("outcome");
    const env = fakeEnv();
    expect(outcome.compute(ctx(trajectory(["thinking", "42"], { kind: "completed" }), env))).toBe(1);
    expect(outcome.compute(ctx(trajectory(["the answer is 42"], { kind: "completed" }), env))).toBe(0.5);
    expect(outcome.compute(ctx(trajectory(["41"], { kind: "completed" }), env))).toBe(0);
    expect(env.checked).toEqual(["42", "the answer is 42", "41"]);
  });
  it("is 0 without consulting the checker when the program did not complete", () => {
    const env = fakeEnv();
    for (const kind of ["max_turns", "tool_crash", "timeout", "aborted"] as const) {
      expect(outcome.compute(ctx(trajectory(["42"], { kind }), env))).toBe(0);
    }
    expect(outcome.compute(ctx(trajectory(["42"]), env))).toBe(0);
    expect(env.checked).toEqual([]);
  });
  it("refuses a completed program that was never checked", () => {
    const c = ctx(trajectory(["42"], { kind: "completed" }));
    delete c.check;
    expect(() => outcome.compute(c)).toThrow(/no checker result for completed program 'p'/);
  });
  it("rejects a non-finite checker score", () => {
    const env = { ...fakeEnv(), checkNow: () => ({ score: NaN, detail: "" }) };
    expect(() => outcome.compute(ctx(trajectory(["42"], { kind: "completed" }), env))).toThrow(/returned score NaN for task 't1'/);
  });
});
