// Running one program of a rollout and rewarding it: the agent loop against the gateway (or a black-box
// command, blackbox-program.ts) in the program's own sandbox, ending with a recorded termination and
// reward. The orchestrated rollout (async-rollout.ts) drives these for sync and async runs alike. The gateway owns each program: the rollout
// creates it there (POST /programs, which creates its stored row) and ends it there (release with
// its termination); the rollout itself writes only groups, tool events and rewards.
import OpenAI from "openai";
import { runToolAgent, type AgentLimits } from "../agents/tool-agent.js";
import { recordAgentEvents } from "../agents/record-outcome.js";
import { createContextPolicy } from "../agents/context/registry.js";
import type { Clock } from "../core/clock.js";
import { ArborError } from "../core/errors.js";
import { retrying } from "../core/retry.js";
import type { Group, Reward, Termination } from "../core/types.js";
import type { CheckResult, Environment, Task } from "../envs/env.js";
import { JUDGEMENT_EVENT_TOOL, judgeProgram, setupEvent } from "../envs/judge-program.js";
import { sampleVariant } from "../envs/variants.js";
import type { RewardContext } from "../reward/reward-fn.js";
import type { Sandbox, SandboxProvider } from "../sandbox/sandbox.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import { runBlackBoxProgram, type AgentSpec } from "./blackbox-program.js";

export interface RolloutOptions {
  runId: string;
  env: Environment;
  tasks: Task[];
  groupSize: number;
  concurrency: number;
  store: TrajectoryStore;
  sandboxes: SandboxProvider;
  /** Gateway origin, e.g. http://127.0.0.1:8080; programs use `${gatewayUrl}/p/{id}/v1`. */
  gatewayUrl: string;
  /** Admin token of the gateway, when it requires one (to create and release programs). */
  gatewayAdminToken?: string;
  model: string;
  limits: AgentLimits;
  temperature: number;
  /**
   * Computes a program's reward once it has ended. It may wait for the program's whole group
   * (completion time is relative to the group; a judge is asynchronous): it is awaited outside the
   * concurrency limit, so waiting programs never keep their group's other programs from running.
   */
  reward: (group: Group, ctx: RewardContext) => Reward | Promise<Reward>;
  seed: number;
  clock: Clock;
  signal?: AbortSignal;
  /** Context-management policy config (agents/context/registry.ts); one policy instance per program. */
  context?: unknown;
  /** Who plays the programs (default: the white-box tool loop); a black box runs in the program's sandbox. */
  agent?: AgentSpec;
  /** Called after each program has ended and been rewarded. */
  onProgramDone?: (p: ProgramResult) => void;
  /**
   * Record how the program was judged (`arbor:judgement`: final answer, check, zeroed reward) before it ends, so
   * that whoever finds it ended can reward it (workers: the reporting worker may die after the end).
   */
  recordJudgement?: boolean;
}

/** What running one program needs: the rollout's options without the group-level ones (tasks, rewards). */
export type ProgramRunOptions = Omit<RolloutOptions, "tasks" | "groupSize" | "concurrency" | "reward" | "onProgramDone">;

export interface ProgramResult {
  programId: string;
  groupId: string;
  termination: Termination;
  reward: Reward;
  calls: number;
}

/** A program that has ended (termination recorded, sandbox gone) and waits for its reward. */
export interface EndedProgram {
  result: Omit<ProgramResult, "reward">;
  ctx: RewardContext;
  /** The environment's hygiene rules zero this program's reward. */
  zeroReward: boolean;
}

/** Runs programs to their end: here, in sandboxes of this process ({@link localPrograms}), or on workers. */
export interface ProgramRunner {
  run(o: Omit<ProgramRunOptions, "sandboxes">, task: Task, group: Group, programId: string, sampleIndex: number): Promise<EndedProgram>;
}

/** Programs run in this process, each in a sandbox of `sandboxes`. */
export function localPrograms(sandboxes: SandboxProvider): ProgramRunner {
  return { run: (o, task, group, programId, sampleIndex) => runProgram({ ...o, sandboxes }, task, group, programId, sampleIndex) };
}

/** Compute and store an ended program's reward (zeroed when the env's hygiene rules say so). */
export async function rewardProgram(o: Pick<RolloutOptions, "reward" | "store">, group: Group, ended: EndedProgram): Promise<ProgramResult> {
  const computed = await o.reward(group, ended.ctx);
  // A zeroed reward keeps its components for analysis, but no per-call step reward may survive it.
  const reward = ended.zeroReward
    ? { total: 0, components: Object.fromEntries(Object.entries(computed.components).map(([k, v]) => [k, k.startsWith("step:") ? 0 : v])) }
    : computed;
  await o.store.setReward(ended.result.programId, reward);
  return { ...ended.result, reward };
}

/**
 * Run one program of `group` to its end (created at the gateway, sandbox, agent, env check, ended at
 * the gateway with its termination), as the sync and async rollouts share it; an aborted `o.signal`
 * ends it as `aborted`. Never throws for the program's own failures: they become its recorded
 * termination. Throws when the gateway cannot create or end the program (then there is no program
 * to record an outcome for, or its outcome could not be recorded).
 */
export async function runProgram(o: ProgramRunOptions, task: Task, group: Group, programId: string, sampleIndex: number): Promise<EndedProgram> {
  const variant = sampleVariant(o.env.variants?.() ?? [], o.seed, programId);
  // The program's own key: it reaches only this program's endpoints and trace at the gateway.
  const apiKey = await createAtGateway(o, {
    id: programId,
    run_id: o.runId,
    group_id: group.id,
    task_id: task.id,
    sample_index: sampleIndex,
    ...(variant ? { variant: { id: variant.id, kind: variant.kind } } : {}),
  });

  let termination: Termination;
  let finalAnswer = "";
  let calls = 0;
  let check: CheckResult | undefined;
  let zeroReward = false;
  let sandbox: Sandbox | undefined;
  try {
    if (o.signal?.aborted) throw new AbortedBeforeStart(o.signal.reason);
    sandbox = await o.sandboxes.create(programId);
    const setup = setupEvent(programId, await o.env.setup(task, sandbox, { variant }));
    const outcome =
      o.agent?.kind === "black-box"
        ? await runBlackBoxProgram({
            spec: o.agent,
            sandbox,
            programId,
            gatewayUrl: o.gatewayUrl,
            apiKey,
            model: o.model,
            task,
            // The environment's traced exec: hygiene rules hold for black boxes as for white-box tools.
            env: o.env,
            limits: o.limits,
            ...(variant?.env ? { variantEnv: variant.env } : {}),
            recordedCalls: async () => (await o.store.getTrajectory(programId))?.calls.length ?? 0,
            ...(o.signal ? { signal: o.signal } : {}),
          })
        : await runToolAgent({
            client: new OpenAI({
              baseURL: `${o.gatewayUrl}/p/${encodeURIComponent(programId)}/v1`,
              apiKey,
              // A retried call could be recorded twice by the gateway; failures end the program instead.
              maxRetries: 0,
            }),
            model: o.model,
            programId,
            messages: task.prompt,
            tools: o.env.tools(),
            sandbox,
            limits: o.limits,
            temperature: o.temperature,
            // From the task and the sample's place in its group, not the program id (which carries the
            // run's start time): the same config and seed sample the same programs run after run.
            seed: o.seed * 1_000_003 + hashString(`${task.id}/${sampleIndex}`),
            clock: o.clock,
            signal: o.signal,
            ...(o.context !== undefined ? { context: createContextPolicy(o.context) } : {}),
            ...(o.agent?.kind === "white-box" && o.agent.toolMode ? { toolMode: o.agent.toolMode } : {}),
            ...(o.agent?.kind === "white-box" && o.agent.module !== undefined ? { module: o.agent.module } : {}),
          });
    if (setup) await o.store.recordTool(setup);
    await recordAgentEvents(o.store, outcome);
    // Checked while the sandbox lives: the env may run hidden tests in it.
    const judged = await judgeProgram(o.env, task, sandbox, programId, outcome);
    for (const ev of judged.events) await o.store.recordTool(ev);
    if (o.recordJudgement) {
      const judgement = { finalAnswer: outcome.finalAnswer, ...(judged.check ? { check: judged.check } : {}), zeroReward: judged.zeroReward };
      await o.store.recordTool({ programId, callIndex: Math.max(0, outcome.calls - 1), tool: JUDGEMENT_EVENT_TOOL, input: "", output: JSON.stringify(judgement), ok: true, durationMs: 0 });
    }
    termination = judged.termination;
    check = judged.check;
    zeroReward = judged.zeroReward;
    finalAnswer = outcome.finalAnswer;
    calls = outcome.calls;
  } catch (e) {
    const detail = e instanceof Error ? e.message : String(e);
    termination =
      e instanceof AbortedBeforeStart
        ? { kind: "aborted", detail: `run aborted before the program started (${e.message})` }
        : o.signal?.aborted && o.agent?.kind === "black-box"
          ? // The black box is stopped by tearing its sandbox down: what failed then failed for the abort.
            { kind: "aborted", detail }
          : { kind: sandbox ? "agent_error" : "sandbox_error", detail };
  }
  // The sandbox goes whatever happened above (ThunderAgent's hook-based GC). A failed teardown is
  // noted on the outcome, never allowed to leave the program without one.
  try {
    await sandbox?.destroy();
  } catch (e) {
    const why = `sandbox teardown failed: ${e instanceof Error ? e.message : String(e)}`;
    termination = { ...termination, detail: termination.detail ? `${termination.detail}; ${why}` : why };
  }

  // Ended where it was created: the gateway records the end after every call of the program.
  await endAtGateway(o, programId, termination);
  return endedProgram(o, task, group, programId, { termination, calls, finalAnswer, ...(check ? { check } : {}), zeroReward });
}

/** How a program ended, as a worker reports it (plain JSON: it crosses the broker). */
export interface ProgramEnd {
  termination: Termination;
  calls: number;
  finalAnswer: string;
  check?: CheckResult;
  zeroReward: boolean;
}

/** The ended program with its trajectory read back from the store, ready for its reward. */
export async function endedProgram(o: Pick<ProgramRunOptions, "store" | "env">, task: Task, group: Group, programId: string, end: ProgramEnd): Promise<EndedProgram> {
  const trajectory = await o.store.getTrajectory(programId);
  if (!trajectory) throw new Error(`program ${programId} vanished from the store`);
  return {
    result: { programId, groupId: group.id, termination: end.termination, calls: end.calls },
    ctx: { trajectory, task, env: o.env, finalAnswer: end.finalAnswer, ...(end.check ? { check: end.check } : {}) },
    zeroReward: end.zeroReward,
  };
}

/**
 * End a program that will not run (again) with `termination`: one whose worker died mid-way, or whose work
 * ran out of deliveries. It is created at the gateway first when it never was, so the outcome has a row; one
 * already ended keeps its first termination. Resolves with the termination the store holds.
 */
export async function endUnrunProgram(o: Omit<ProgramRunOptions, "sandboxes">, task: Task, group: Group, programId: string, sampleIndex: number, termination: Termination): Promise<Termination> {
  let row = (await o.store.getTrajectory(programId))?.program;
  if (row === undefined) {
    const { status, json } = await gatewayPost(o, "/programs", { id: programId, run_id: o.runId, group_id: group.id, task_id: task.id, sample_index: sampleIndex }, `creating program ${programId}`);
    // 409: the gateway created it for a worker whose row write had not landed yet; it is ended below all the same.
    if (status !== 201 && status !== 409) {
      throw new ArborError(`gateway refused to create program ${programId}: ${status} ${json.error?.message ?? ""}`.trim(), "backend_protocol");
    }
  } else if (row.state === "terminated" && row.termination) return row.termination;
  const { status, json } = await gatewayPost(o, `/programs/${encodeURIComponent(programId)}/release`, { termination }, `ending program ${programId}`);
  if (status === 404) {
    // The gateway does not hold it (restarted since): the row is ended in the store directly.
    await o.store.endProgram(programId, termination, o.clock.now());
  } else if (status !== 200) {
    throw new ArborError(`gateway could not end program ${programId}: ${status} ${json.error?.message ?? ""}`.trim(), "backend_protocol");
  }
  row = (await o.store.getTrajectory(programId))?.program;
  return row?.termination ?? termination;
}

/** Where a program goes in the store, as POST /programs takes it. */
interface NewProgramBody {
  id: string;
  run_id: string;
  group_id: string;
  task_id: string;
  sample_index: number;
  variant?: { id: string; kind: "variant" | "perturbation" };
}

/**
 * POST to the gateway's admin routes. A gateway that cannot be reached (restarting, a cut connection) is tried
 * again for about 25 s: creating and releasing a program are safe to repeat (a repeat is refused as existing, or
 * answered with the first release's result).
 */
async function gatewayPost(o: Pick<ProgramRunOptions, "gatewayUrl" | "gatewayAdminToken" | "clock">, path: string, body: object, what: string): Promise<{ status: number; json: { api_key?: string; error?: { message?: string } } }> {
  const post = async (): Promise<{ status: number; json: { api_key?: string; error?: { message?: string } } }> => {
    const res = await fetch(`${o.gatewayUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(o.gatewayAdminToken ? { authorization: `Bearer ${o.gatewayAdminToken}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as { api_key?: string; error?: { message?: string } } };
  };
  try {
    return await retrying(`gateway ${what}`, post, o.clock);
  } catch (e) {
    throw new ArborError(`gateway unreachable ${what}: ${e instanceof Error ? e.message : String(e)}`, "backend_unreachable");
  }
}

/** Create the program at the gateway (which creates its stored row); returns its key. */
async function createAtGateway(o: ProgramRunOptions, body: NewProgramBody): Promise<string> {
  const { status, json } = await gatewayPost(o, "/programs", body, `creating program ${body.id}`);
  if (status !== 201 || typeof json.api_key !== "string") {
    throw new ArborError(`gateway refused to create program ${body.id}: ${status} ${json.error?.message ?? ""}`.trim(), "backend_protocol");
  }
  return json.api_key;
}

/** End the program at the gateway with its termination; resolves once the gateway recorded the end. */
async function endAtGateway(o: ProgramRunOptions, programId: string, termination: Termination): Promise<void> {
  const { status, json } = await gatewayPost(o, `/programs/${encodeURIComponent(programId)}/release`, { termination }, `ending program ${programId}`);
  if (status !== 200) {
    throw new ArborError(`gateway could not end program ${programId}: ${status} ${json.error?.message ?? ""}`.trim(), "backend_protocol");
  }
}

/** The run was cut before the program's sandbox was asked for; the message is the cut's reason. */
class AbortedBeforeStart extends Error {
  constructor(reason: unknown) {
    super(reason instanceof Error ? reason.message : String(reason ?? "aborted"));
  }
}

function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0) % 1_000_000;
}
