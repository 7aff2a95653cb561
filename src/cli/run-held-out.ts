// Held-out evaluation for `arbor run` (config `eval`): the held-out programs run as the rollout's do (gateway,
// engines, sandboxes) in the run's own store run, in groups marked held-out that no batch is taken from; the
// train loop asks for a score per version, and this prints and records what it gets.
import type { RunConfig } from "../core/config.js";
import type { Task } from "../envs/env.js";
import { HeldOutEvaluation, type HeldOutScore, type HeldOutState } from "../loop/held-out-eval.js";
import { heldOutPrograms, type HeldOutProgramsOptions } from "../loop/held-out-programs.js";
import type { MetricsLog } from "../loop/metrics-log.js";
import { heldOutIncompleteLine, heldOutStartLine } from "./iteration-report.js";

export interface RunEvaluationOptions extends Omit<HeldOutProgramsOptions, "temperature" | "samples"> {
  cfg: RunConfig & { eval: NonNullable<RunConfig["eval"]> };
  tasks: readonly Task[];
  metrics: MetricsLog;
  log: (line: string) => void;
  /** A resumed run's evaluation state (resume.json): the starting policy is not scored again. */
  restore?: HeldOutState;
  /**
   * The starting policy was scored (its metrics line written): the run records the state in resume.json at once,
   * so that a kill before the first step's end does not have the resumed run score it again.
   */
  onBaseScored?: (state: HeldOutState) => void;
}

/** The run's evaluation and the train loop's `evaluate` hook over it. */
export function runEvaluation(o: RunEvaluationOptions): {
  evaluation: HeldOutEvaluation;
  evaluate: (step: number, version: number, last: boolean) => Promise<HeldOutScore | undefined>;
} {
  const { cfg, tasks, metrics, log, restore, onBaseScored, ...programs } = o;
  const temperature = cfg.eval.temperature ?? cfg.agent.temperature;
  const run = heldOutPrograms({ ...programs, temperature, samples: cfg.eval.samples });
  const evaluation = new HeldOutEvaluation({ tasks, samples: cfg.eval.samples, every: cfg.eval.every, concurrency: cfg.rollout.concurrency, temperature, run, ...(restore ? { restore } : {}) });
  const evaluate = async (step: number, version: number, last: boolean): Promise<HeldOutScore | undefined> => {
    // Resumed: the starting policy's score is the stored one (printed and recorded when it was taken).
    if (step === 0 && restore !== undefined) return evaluation.baseScore;
    if (!evaluation.due(version, last)) return undefined;
    const score = await evaluation.score(version);
    if (score === undefined) {
      // A version with aborted held-out programs is reported as incomplete, never scored.
      const x = evaluation.incomplete.find((i) => i.version === version);
      log(heldOutIncompleteLine(version, x?.ended ?? 0, x?.total ?? 0));
      return undefined;
    }
    if (step === 0) {
      metrics.appendHeldOut(score);
      const state = evaluation.state();
      if (state) onBaseScored?.(state);
      log(heldOutStartLine(score));
    }
    return score;
  };
  return { evaluation, evaluate };
}
