// The contract every RewardFn passes (run for each registered one in contract.test.ts): a kebab-case
// name, finite and repeatable values on a standard group of programs, a consistent per-call split,
// sync functions never returning promises, and group-relative ones refusing to run without a group.
import { expect, it } from "vitest";
import { ArborError } from "../core/errors.js";
import type { ToolEvent } from "../core/types.js";
import type { RewardContext, RewardFn, RewardValue } from "./reward-fn.js";
import { ctx, trajectory } from "../testing/reward-helpers.js";

/** A group of varied programs: correct, wrong, failing tools, mixed language, timed out, no calls. */
export function contractGroup(): RewardContext[] {
  const ev = (callIndex: number, ok: boolean): ToolEvent => ({ programId: "p", callIndex, tool: "calc", input: "6*7", output: ok ? "42" : "error", ok, durationMs: 5 });
  const specs: { texts: string[]; kind?: "completed" | "timeout"; tools?: ToolEvent[]; end: number }[] = [
    { texts: ["<|tool_call|>calc 6*7<|/tool_call|>", "42"], kind: "completed", tools: [ev(0, true)], end: 50 },
    { texts: ["<|tool_call|>calc 6*7<|/tool_call|>", "<|tool_call|>calc 6*<|/tool_call|>", "42"], kind: "completed", tools: [ev(0, true), ev(1, false)], end: 90 },
    { texts: ["Сначала I think, the answer is 41"], kind: "completed", end: 20 },
    { texts: ["<|tool_call|>calc 6*"], kind: "timeout", end: 200 },
    { texts: [], kind: "completed", end: 1 },
  ];
  return specs.map((s, i) => {
    const t = trajectory(s.texts, s.kind ? { kind: s.kind } : undefined);
    t.program.id = `p${i}`;
    t.program.endedAt = s.end;
    t.tools.push(...(s.tools ?? []).map((e) => ({ ...e, programId: t.program.id })));
    t.calls.forEach((c, k) => (c.timings = { start: k * 10, end: k * 10 + 5 }));
    return ctx(t);
  });
}

function valueOf(v: RewardValue): number {
  return typeof v === "number" ? v : v.value;
}

/** Register the contract tests for one reward function, created fresh by `make`. */
export function rewardFnContract(name: string, make: () => RewardFn): void {
  it(`${name}: has a kebab-case name that is its registry name`, () => {
    const fn = make();
    expect(fn.name).toBe(name);
    expect(fn.name).toMatch(/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/);
  });

  it(`${name}: gives finite, repeatable values with a consistent per-call split`, async () => {
    const fn = make();
    const group = contractGroup();
    for (const c of group) c.group = group;
    for (const c of group) {
      const first = fn.compute(c);
      if (!fn.isAsync) expect(first).not.toBeInstanceOf(Promise);
      const a = await first;
      const b = await fn.compute(c);
      expect(b).toEqual(a);
      expect(Number.isFinite(valueOf(a))).toBe(true);
      if (typeof a !== "number") {
        expect(a.steps).toHaveLength(c.trajectory.calls.length);
        for (const s of a.steps) expect(Number.isFinite(s)).toBe(true);
        expect(a.steps.reduce((x, y) => x + y, 0)).toBeCloseTo(a.value, 9);
      }
    }
  });

  it(`${name}: without a group, runs only when it does not need one`, async () => {
    const fn = make();
    const alone = contractGroup()[0] as RewardContext;
    if (fn.needsGroup) {
      let err: unknown;
      try {
        await fn.compute(alone);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ArborError);
      expect((err as Error).message).toMatch(new RegExp(`${name}.*group`));
    } else {
      expect(Number.isFinite(valueOf(await fn.compute(alone)))).toBe(true);
    }
  });
}
