// Validate a dataset: for every task the ground-truth and no-op checks and, when judges are given,
// the judge panel; a task is kept only when every check it went through says so. Tasks run with a
// bounded concurrency; the report keeps each task's reasons and the checks' details.
import { ArborError } from "../core/errors.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { groundTruthCheck, noOpCheck, type CheckOutcome } from "./checks.js";
import type { Dataset } from "./dataset.js";
import { reviewTask, type PanelJudge, type PanelOptions, type PanelResult } from "./judge-panel.js";

export interface ValidateOptions {
  sandboxes: SandboxProvider;
  /** Tasks validated at once (default 2). */
  concurrency?: number;
  passScore?: number;
  /** The judge panel; absent or empty: no panel. */
  judges?: readonly PanelJudge[];
  panel?: PanelOptions;
  /** Prefix of sandbox ids (unique per run, default "validate"). */
  runId?: string;
}

/** Why a task was dropped. */
/** `judge-unreachable`: the panel could not decide, its judges unreachable (the task is left out, not judged). */
export type DropReason = "golden-fails" | "no-op-passes" | "judge-rejects" | "judge-unreachable";

export interface TaskReport {
  id: string;
  kept: boolean;
  reasons: DropReason[];
  groundTruth: CheckOutcome;
  noOp: CheckOutcome;
  judge?: PanelResult;
}

export interface ValidationReport {
  dataset: string;
  env: string;
  passScore: number;
  judges: string[];
  tasks: TaskReport[];
  summary: { total: number; kept: number; dropped: number; byReason: Record<DropReason, number> };
}

/** Validate every task of `dataset`. */
export async function validateDataset(dataset: Dataset, opts: ValidateOptions): Promise<ValidationReport> {
  const concurrency = opts.concurrency ?? 2;
  if (!(Number.isInteger(concurrency) && concurrency >= 1 && concurrency <= 64)) {
    throw new ArborError(`validate: concurrency must be an integer in 1..64, got ${concurrency}`, "config");
  }
  const passScore = opts.passScore ?? 1;
  // Scores are in [0, 1]: at 0 or below doing nothing passes every task, above 1 no golden solution can.
  if (!(passScore > 0 && passScore <= 1)) throw new ArborError(`validate: passScore must be in (0, 1], got ${passScore}`, "config");
  const checkOpts = { passScore, sandboxPrefix: opts.runId ?? "validate" };
  const judges = opts.judges ?? [];
  const reports: TaskReport[] = new Array(dataset.tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < dataset.tasks.length) {
      const i = next++;
      const t = dataset.tasks[i] as (typeof dataset.tasks)[number];
      const [groundTruth, noOp, judge] = await Promise.all([
        groundTruthCheck(dataset.env, t, opts.sandboxes, checkOpts),
        noOpCheck(dataset.env, t, opts.sandboxes, checkOpts),
        judges.length > 0 ? reviewTask(judges, t, opts.panel) : undefined,
      ]);
      const reasons: DropReason[] = [];
      if (!groundTruth.ok) reasons.push("golden-fails");
      if (!noOp.ok) reasons.push("no-op-passes");
      if (judge && !judge.ok) reasons.push(judge.undecided ? "judge-unreachable" : "judge-rejects");
      reports[i] = { id: t.task.id, kept: reasons.length === 0, reasons, groundTruth, noOp, ...(judge ? { judge } : {}) };
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, dataset.tasks.length) }, worker));
  const byReason: Record<DropReason, number> = { "golden-fails": 0, "no-op-passes": 0, "judge-rejects": 0, "judge-unreachable": 0 };
  for (const r of reports) for (const why of r.reasons) byReason[why]++;
  const kept = reports.filter((r) => r.kept).length;
  return {
    dataset: dataset.name,
    env: dataset.env.name,
    passScore,
    judges: judges.map((j) => j.model),
    tasks: reports,
    summary: { total: reports.length, kept, dropped: reports.length - kept, byReason },
  };
}
