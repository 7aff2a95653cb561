// What crosses the broker when programs run on workers (issue 16): the work message for one program, and the
// events between the orchestrator and its workers. The message is self-contained (the task, the group, the
// run's config) so that any worker can run any program, and a redelivery carries everything a second worker
// needs to end the program a dead one left behind.
import type { ArborEvents } from "../../broker/event-bus.js";
import { ArborError } from "../../core/errors.js";
import type { Group, Termination, ToolEvent } from "../../core/types.js";
import type { CheckResult, Task } from "../../envs/env.js";
import { JUDGEMENT_EVENT_TOOL } from "../../envs/judge-program.js";
import type { ProgramEnd } from "../sync-rollout.js";

/** One program to run, published by the orchestrator under the program's id. */
export interface ProgramWork {
  v: 1;
  /** The store run the program belongs to. */
  runId: string;
  /** The run's configuration as the worker's context factory reads it (the run config, as JSON). */
  config: string;
  task: Task;
  group: Group;
  programId: string;
  sampleIndex: number;
  /**
   * The orchestrator process that published it: its cut names it, so that a run resumed by another process (same run
   * id) is not cut by an earlier one's. Absent in messages of older orchestrators (cut by run id alone).
   */
  session?: string;
}

/** The key a cut applies to: the run, in the orchestrator process (session) that cut it. */
export function cutScope(runId: string, session: string | undefined): string {
  return session === undefined ? runId : `${runId}#${session}`;
}

/** A worker's report that a program ended (its termination is in the store; the reward is the orchestrator's). */
export interface ProgramEndedEvent extends ProgramEnd {
  programId: string;
  runId: string;
  /** The worker that reported it. */
  worker: string;
  /** Set when the end was recovered rather than seen: why the final answer and check are missing. */
  recovered?: string;
}

/** The orchestrator stopped a run: workers end its programs (running or not yet started) as aborted. */
export interface RunCancelledEvent {
  runId: string;
  reason: string;
  /** The cutting orchestrator's {@link ProgramWork.session}: only its programs are cut. */
  session?: string;
}

/** The events of a rollout run on workers. */
export interface RolloutEvents extends ArborEvents {
  "program-ended": ProgramEndedEvent;
  "run-cancelled": RunCancelledEvent;
}

/** Checks a received work message's shape; throws naming the field (the delivery is then dead-lettered). */
export function checkProgramWork(w: unknown): ProgramWork {
  const o = w as Partial<ProgramWork> | null;
  const bad = (field: string, why: string): never => {
    throw new ArborError(`program work: ${field} ${why}`, "invalid_request");
  };
  if (o === null || typeof o !== "object") return bad("message", "must be an object");
  if (o.v !== 1) bad("v", `must be 1, got ${JSON.stringify(o.v)}`);
  for (const f of ["runId", "config", "programId"] as const) if (typeof o[f] !== "string" || o[f] === "") bad(f, "must be a non-empty string");
  if (o.session !== undefined && (typeof o.session !== "string" || o.session === "")) bad("session", "must be a non-empty string");
  if (!Number.isInteger(o.sampleIndex) || (o.sampleIndex as number) < 0) bad("sampleIndex", "must be an integer >= 0");
  if (typeof o.task?.id !== "string" || !Array.isArray(o.task.prompt)) bad("task", "must be a task with an id and a prompt");
  if (typeof o.group?.id !== "string" || !Array.isArray(o.group.programIds)) bad("group", "must be a group with an id and programIds");
  if (!o.group?.programIds.includes(o.programId as string)) bad("programId", `is not one of group ${o.group?.id}'s programs`);
  return o as ProgramWork;
}

/** The termination of a program whose earlier delivery never finished (its worker died, or failed to end it). */
export function workerLost(delivery: number, maxDeliver: number, worker: string): Termination {
  return { kind: "aborted", detail: `its worker stopped before ending it (redelivered: delivery ${delivery} of ${maxDeliver}); ended by worker ${worker}` };
}

/** The judgement a program's worker recorded before ending it (`runProgram`'s recordJudgement), if any. */
export function recordedJudgement(tools: readonly ToolEvent[]): Pick<ProgramEnd, "finalAnswer" | "check" | "zeroReward"> | undefined {
  const ev = tools.find((t) => t.tool === JUDGEMENT_EVENT_TOOL);
  if (ev === undefined) return undefined;
  const j = JSON.parse(ev.output) as { finalAnswer?: unknown; check?: CheckResult; zeroReward?: unknown };
  return { finalAnswer: typeof j.finalAnswer === "string" ? j.finalAnswer : "", ...(j.check ? { check: j.check } : {}), zeroReward: j.zeroReward === true };
}
