// `arbor run --resume <run dir>`: the small state file a run writes to its output folder after each completed
// iteration or trainer step (`resume.json`, written atomically), and the checks that a resumed run is the same run.
// It holds what the next iteration needs and the store does not: the run's config and id, the iterations
// done (a sync run's task cursor follows: iteration k rolls out the k-th slice of the dataset; an async run lists
// the tasks its steps trained on), the policy version with its checkpoint and the trainer's optimizer state beside
// it, the held-out evaluation's base samples and scores (with `eval`), how many times the run was resumed (fresh
// group ids for the groups a kill interrupted and the evaluations after it), and an iteration trained and synced
// whose held-out evaluation or report a kill cut (`trained`: taken as done on resume, then evaluated and reported).
// Random state needs no entry: a sync run takes its tasks in order, an async run in the order its seed shuffles
// them, and each program's sampling seed is derived from the config seed, its task and its sample index
// (rollout/sync-rollout.ts), never from a generator's position.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ArborError } from "../core/errors.js";
import { writeFileAtomic } from "../model/atomic-file.js";
import type { HeldOutState } from "./held-out-eval.js";
import type { MetricsRecord } from "./metrics-log.js";

export const RESUME_FILE = "resume.json";

/** What `resume.json` holds (format 1). */
export interface ResumeState {
  format: 1;
  /** The run's base id (store runs `${runId}-it{k}`). */
  runId: string;
  /** The resolved run config the run started with (JSON of RunConfig). */
  config: unknown;
  /** Iterations whose step completed (batch exported, trainer stepped, engines synced). */
  completedIterations: number;
  /**
   * Tasks the completed iterations rolled out: a sync run's next iteration starts at this index of the dataset (an
   * async run's count of `consumedTasks`).
   */
  taskCursor: number;
  /**
   * Async runs: the indices of the tasks whose groups the completed steps trained on (their window takes groups out
   * of admission order, so no cursor says which); a resumed run leaves them out of its shuffled order.
   */
  consumedTasks?: number[];
  /** Policy version after the last completed iteration (0: the starting model). */
  policyVersion: number;
  /** Checkpoint GGUF of `policyVersion` (absent at version 0 or without training). */
  checkpoint?: string;
  /** The reference trainer's optimizer state saved beside that checkpoint. */
  optimizer?: string;
  /** Times this run was resumed so far. */
  resumes: number;
  /** With `eval`: the held-out evaluation's base samples and scores so far (absent before the first is scored). */
  heldOut?: HeldOutState;
  /**
   * With `eval`: the iterations whose tasks the held-out ones were drawn after (the run's first `iterations`), so
   * that raising `iterations` on resume leaves the held-out tasks as they were.
   */
  heldOutAfter?: number;
  /** The deployment (cluster file `name`) a run with `--cluster` ran on; absent for a run in one process. */
  cluster?: string;
  /**
   * With `--cluster`: the orchestrator process that last ran the run (its program work and cuts carry this session);
   * a resumed run cuts what that process left on the workers.
   */
  session?: string;
  /**
   * The iteration (or step) after the completed ones when it was trained and its weights loaded but a kill cut its
   * held-out evaluation or report: written before the evaluation. A resumed run takes it as done
   * ({@link adoptTrained}) instead of rolling it out and training it again, then evaluates and reports it.
   */
  trained?: TrainedStep;
  /** Clock time of the write (ms). */
  updatedAt: number;
}

/**
 * What a trained iteration changes in the state (its `completedIterations` is the completed ones + 1), and its metrics
 * line before its held-out evaluation (`heldOut` and `evalMs` still null).
 */
export type TrainedStep = Pick<ResumeState, "completedIterations" | "taskCursor" | "consumedTasks" | "policyVersion" | "checkpoint" | "optimizer"> & {
  record: MetricsRecord;
};

/**
 * The state a resumed run goes on from: with a {@link TrainedStep}, that iteration counts as done (its fields taken
 * over) and comes back as `unreported`, for the run to evaluate and report it before going on.
 */
export function adoptTrained(state: ResumeState): { state: ResumeState; unreported?: MetricsRecord } {
  const { trained, ...rest } = state;
  if (trained === undefined) return { state };
  const { record, ...fields } = trained;
  return { state: { ...rest, ...fields }, unreported: record };
}

/** Write `dir/resume.json` whole or not at all. */
export function writeResumeState(dir: string, state: ResumeState): void {
  writeFileAtomic(join(dir, RESUME_FILE), (put) => put(new TextEncoder().encode(`${JSON.stringify(state, null, 2)}\n`)));
}

/**
 * Read `dir/resume.json`.
 * @throws ArborError naming the file and the field when it is missing or not a resume state.
 */
export function readResumeState(dir: string): ResumeState {
  const path = join(dir, RESUME_FILE);
  if (!existsSync(path)) {
    throw new ArborError(`--resume ${dir}: no ${RESUME_FILE} there (a run writes it as it starts and after each completed iteration or step; is this the run's output.dir?)`, "config");
  }
  let s: Record<string, unknown>;
  try {
    s = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch (err) {
    throw new ArborError(`--resume: ${path} is not valid JSON (${(err as Error).message})`, "config");
  }
  const bad = (field: string, why: string): never => {
    throw new ArborError(`--resume: ${path}: ${field} ${why}`, "config");
  };
  if (s.format !== 1) bad("format", "must be 1");
  if (typeof s.runId !== "string" || s.runId === "") bad("runId", "must be a non-empty string");
  if (typeof s.config !== "object" || s.config === null) bad("config", "must be the run's config object");
  for (const f of ["completedIterations", "taskCursor", "policyVersion", "resumes", "updatedAt"]) {
    const v = s[f];
    if (!(typeof v === "number" && Number.isInteger(v) && v >= 0)) bad(f, "must be an integer >= 0");
  }
  for (const f of ["checkpoint", "optimizer"]) if (s[f] !== undefined && typeof s[f] !== "string") bad(f, "must be a path");
  if ((s.policyVersion as number) > 0 && s.checkpoint === undefined) bad("checkpoint", `is missing for policy version ${String(s.policyVersion)}`);
  if (s.heldOut !== undefined) checkHeldOut(s.heldOut, bad);
  if (s.consumedTasks !== undefined && !(Array.isArray(s.consumedTasks) && s.consumedTasks.every((i) => Number.isInteger(i) && (i as number) >= 0))) {
    bad("consumedTasks", "must be a list of task indices (integers >= 0)");
  }
  if (s.cluster !== undefined && (typeof s.cluster !== "string" || s.cluster === "")) bad("cluster", "must be the deployment's name");
  if (s.session !== undefined && (typeof s.session !== "string" || s.session === "")) bad("session", "must be the orchestrator's session id");
  if (s.heldOutAfter !== undefined && !(Number.isInteger(s.heldOutAfter) && (s.heldOutAfter as number) >= 1)) bad("heldOutAfter", "must be an integer >= 1");
  if (s.trained !== undefined) checkTrained(s.trained, s.completedIterations as number, bad);
  return s as unknown as ResumeState;
}

/** Refuses a `trained` entry that is not the iteration after the completed ones with its metrics line. */
function checkTrained(t: unknown, completed: number, bad: (field: string, why: string) => never): void {
  if (typeof t !== "object" || t === null) bad("trained", "must be an object");
  const o = t as Record<string, unknown>;
  if (o.completedIterations !== completed + 1) bad("trained.completedIterations", `must be ${completed + 1} (the iteration after the ${completed} completed)`);
  for (const f of ["taskCursor", "policyVersion"]) if (!(Number.isInteger(o[f]) && (o[f] as number) >= 0)) bad(`trained.${f}`, "must be an integer >= 0");
  for (const f of ["checkpoint", "optimizer"]) if (o[f] !== undefined && typeof o[f] !== "string") bad(`trained.${f}`, "must be a path");
  if ((o.policyVersion as number) > 0 && o.checkpoint === undefined) bad("trained.checkpoint", `is missing for policy version ${String(o.policyVersion)}`);
  const r = o.record as { index?: unknown } | undefined;
  if (typeof r !== "object" || r === null || r.index !== completed + 1) bad("trained.record", `must be the metrics line of iteration ${completed + 1}`);
}

/** Refuses a `heldOut` entry that is not a held-out state (the fields the evaluation reads again). */
function checkHeldOut(h: unknown, bad: (field: string, why: string) => never): void {
  const o = h as { base?: { version?: unknown; samples?: unknown }; scores?: unknown };
  if (typeof o !== "object" || o === null) bad("heldOut", "must be an object");
  if (!Number.isInteger(o.base?.version)) bad("heldOut.base.version", "must be an integer");
  const samples = o.base?.samples;
  if (!Array.isArray(samples) || !samples.every((x: { taskId?: unknown; sample?: unknown; solved?: unknown }) => typeof x?.taskId === "string" && Number.isInteger(x.sample) && typeof x.solved === "boolean")) {
    bad("heldOut.base.samples", "must be a list of {taskId, sample, solved}");
  }
  if (!Array.isArray(o.scores) || !o.scores.every((x: { version?: unknown }) => Number.isInteger(x?.version))) bad("heldOut.scores", "must be a list of scores with their version");
}

/**
 * The first difference between the stored and the given config, as `path: stored X, given Y`, or undefined
 * when they are the same run. `iterations` may be raised (to continue further) but not set below the
 * iterations already done.
 */
export function configDifference(stored: unknown, given: unknown, completed: number): string | undefined {
  // Compared as JSON, the form the state file keeps.
  const s = JSON.parse(JSON.stringify(stored)) as Record<string, unknown>;
  const g = JSON.parse(JSON.stringify(given)) as Record<string, unknown>;
  const gi = g.iterations as number;
  if (gi < completed) return `iterations: ${gi} is below the ${completed} iterations already done`;
  return firstDifference({ ...s, iterations: 0 }, { ...g, iterations: 0 }, "");
}

function firstDifference(a: unknown, b: unknown, path: string): string | undefined {
  const name = path === "" ? "config" : path;
  if (a === b) return undefined;
  const show = (v: unknown): string => (v === undefined ? "(not set)" : JSON.stringify(v));
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return `${name}: stored ${a.length} entries, given ${b.length}`;
    for (let i = 0; i < a.length; i++) {
      const d = firstDifference(a[i], b[i], `${path}${path ? "." : ""}${i}`);
      if (d) return d;
    }
    return undefined;
  }
  if (isObj(a) && isObj(b) && !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const d = firstDifference(a[k], b[k], `${path}${path ? "." : ""}${k}`);
      if (d) return d;
    }
    return undefined;
  }
  return `${name}: stored ${show(a)}, given ${show(b)}`;
}
