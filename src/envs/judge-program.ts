// The environment's side of ending a program: run the checker while the sandbox is still alive
// (hidden tests run there), turn hygiene violations into trajectory events, and end a program that
// broke the rules as `hygiene_violation` when the environment zeroes its reward or stopped it.
import type { Termination, ToolEvent } from "../core/types.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { CheckResult, Environment, SetupReport, Task } from "./env.js";

/** Tool names of Arbor's own trajectory events; ':' keeps them apart from any agent tool name. */
export const HYGIENE_EVENT_TOOL = "arbor:hygiene_violation";
/** A tool run whose file accesses could not be checked (killed before its trace came back). */
export const UNVERIFIED_EVENT_TOOL = "arbor:hygiene_unverified";
export const SETUP_EVENT_TOOL = "arbor:env_setup";
/** How a program run on a worker was judged (final answer, check, zeroed reward), recorded before it ends. */
export const JUDGEMENT_EVENT_TOOL = "arbor:judgement";

export interface AgentOutcomeLike {
  termination: Termination;
  finalAnswer: string;
  tools: readonly ToolEvent[];
}

export interface Judgement {
  termination: Termination;
  /** The checker's result; present when the program completed. */
  check?: CheckResult;
  /** Events to append to the trajectory (hygiene violations, unverified tool runs). */
  events: ToolEvent[];
  /** True when the reward must be 0 whatever the reward functions say. */
  zeroReward: boolean;
}

/** The setup report as a trajectory event (undefined when there is nothing to record). */
export function setupEvent(programId: string, report: SetupReport): ToolEvent | undefined {
  if (!report.variant && !report.cleanup) return undefined;
  const cleanup = report.cleanup
    ? { removed: report.cleanup.removed, kept: report.cleanup.kept, diff: report.cleanup.diff }
    : undefined;
  return {
    programId,
    callIndex: 0,
    tool: SETUP_EVENT_TOOL,
    input: report.variant ?? "",
    output: JSON.stringify({ variant: report.variant ?? null, cleanup: cleanup ?? null }),
    ok: true,
    durationMs: 0,
  };
}

/** Check a finished program and apply the environment's hygiene rules. */
export async function judgeProgram(
  env: Environment,
  task: Task,
  sandbox: Sandbox,
  programId: string,
  outcome: AgentOutcomeLike,
): Promise<Judgement> {
  let check: CheckResult | undefined;
  if (outcome.termination.kind === "completed") {
    try {
      check = await env.check(task, { finalAnswer: outcome.finalAnswer, sandbox, tools: outcome.tools });
    } catch (e) {
      throw new Error(`checking task ${task.id} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }
  const record = env.hygieneRecord?.(sandbox) ?? { violations: [], unverified: [] };
  // Attributed to the model call whose tool request caused it.
  const callOf = (tool: string, input: string): number => outcome.tools.find((t) => t.tool === tool && t.input === input)?.callIndex ?? 0;
  const events: ToolEvent[] = record.violations.map((v) => ({
    programId,
    callIndex: callOf(v.tool, v.input),
    tool: HYGIENE_EVENT_TOOL,
    input: v.path,
    output: JSON.stringify({ mode: v.mode, syscall: v.syscall, rule: v.rule, tool: v.tool, toolInput: v.input }),
    ok: false,
    durationMs: 0,
  }));
  for (const u of record.unverified) {
    events.push({ programId, callIndex: callOf(u.tool, u.input), tool: UNVERIFIED_EVENT_TOOL, input: u.tool, output: u.input, ok: false, durationMs: 0 });
  }
  const zeroReward = record.violations.length > 0 && env.hygiene?.zeroRewardOnViolation === true;
  const stopped = record.violations.length > 0 && env.hygiene?.stopOnViolation === true;
  const first = record.violations[0];
  const termination: Termination = (zeroReward || stopped) && first
    ? {
        kind: "hygiene_violation",
        detail: `${first.mode} of protected path ${first.path} by ${first.tool} (${record.violations.length} violation(s)); was ${outcome.termination.kind}`,
      }
    : outcome.termination;
  return { termination, ...(check ? { check } : {}), events, zeroReward };
}
