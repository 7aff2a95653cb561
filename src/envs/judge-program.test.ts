import { describe, expect, it } from "vitest";
import type { ToolEvent } from "../core/types.js";
import type { HygieneViolation } from "../sandbox/hygiene/access-policy.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { Environment, HygieneConfig } from "./env.js";
import { HYGIENE_EVENT_TOOL, judgeProgram, setupEvent, UNVERIFIED_EVENT_TOOL } from "./judge-program.js";

const sandbox = { programId: "p" } as Sandbox;
const violation: HygieneViolation = { path: "/workspace/.grader/t", mode: "read", syscall: "openat", rule: "/workspace/.grader/**", toolRun: 1, tool: "run", input: "node x.js" };
const tools: ToolEvent[] = [
  { programId: "p", callIndex: 0, tool: "read_file", input: "a", output: "", ok: true, durationMs: 1 },
  { programId: "p", callIndex: 2, tool: "run", input: "node x.js", output: "", ok: true, durationMs: 1 },
];

function env(violations: HygieneViolation[], hygiene?: HygieneConfig, fail = false): Environment & { checks: number } {
  const e = {
    name: "fake",
    checks: 0,
    tasks: () => [],
    tools: () => [],
    setup: async () => ({}),
    golden: () => [],
    solveGolden: async () => "",
    check: async () => {
      e.checks++;
      if (fail) throw new Error("node missing");
      return { score: 1, detail: "ok" };
    },
    hygieneRecord: () => ({ violations, unverified: [{ toolRun: 0, tool: "read_file", input: "a" }] }),
    ...(hygiene ? { hygiene } : {}),
  };
  return e;
}

const task = { id: "t", prompt: [], meta: {} };
const completed = { termination: { kind: "completed" as const }, finalAnswer: "done", tools };

describe("judgeProgram", () => {
  it("checks completed programs and records violations against the call that made them", async () => {
    const j = await judgeProgram(env([violation]), task, sandbox, "p", completed);
    expect(j.check).toEqual({ score: 1, detail: "ok" });
    expect(j.termination).toEqual({ kind: "completed" });
    expect(j.zeroReward).toBe(false);
    expect(j.events).toEqual([
      {
        programId: "p",
        callIndex: 2,
        tool: HYGIENE_EVENT_TOOL,
        input: "/workspace/.grader/t",
        output: JSON.stringify({ mode: "read", syscall: "openat", rule: "/workspace/.grader/**", tool: "run", toolInput: "node x.js" }),
        ok: false,
        durationMs: 0,
      },
      { programId: "p", callIndex: 0, tool: UNVERIFIED_EVENT_TOOL, input: "read_file", output: "a", ok: false, durationMs: 0 },
    ]);
  });

  it("ends the program as hygiene_violation when the env zeroes rewards, whatever its own ending", async () => {
    const zero = { zeroRewardOnViolation: true };
    const j = await judgeProgram(env([violation], zero), task, sandbox, "p", { ...completed, termination: { kind: "max_turns" } });
    expect(j.zeroReward).toBe(true);
    expect(j.check).toBeUndefined();
    expect(j.termination.kind).toBe("hygiene_violation");
    expect(j.termination.detail).toMatch(/was max_turns$/);
    const stopped = await judgeProgram(env([violation], { zeroRewardOnViolation: false, stopOnViolation: true }), task, sandbox, "p", { ...completed, termination: { kind: "tool_crash" } });
    expect([stopped.termination.kind, stopped.zeroReward]).toEqual(["hygiene_violation", false]);
    const clean = await judgeProgram(env([], zero), task, sandbox, "p", completed);
    expect([clean.zeroReward, clean.termination.kind, clean.events.map((e) => e.tool)]).toEqual([false, "completed", [UNVERIFIED_EVENT_TOOL]]);
  });

  it("does not check unfinished programs and names the task when checking fails", async () => {
    const e = env([]);
    await judgeProgram(e, task, sandbox, "p", { ...completed, termination: { kind: "tool_crash" } });
    expect(e.checks).toBe(0);
    await expect(judgeProgram(env([], undefined, true), task, sandbox, "p", completed)).rejects.toThrow("checking task t failed: node missing");
  });

  it("setup events carry the variant and the clean-up, and are skipped when there is nothing", () => {
    expect(setupEvent("p", {})).toBeUndefined();
    const ev = setupEvent("p", { variant: "lang-c" })!;
    expect([ev.tool, ev.input, JSON.parse(ev.output)]).toEqual(["arbor:env_setup", "lang-c", { variant: "lang-c", cleanup: null }]);
  });
});
