// The RL algorithm on one screen, sync and async alike: rollout → rewards → batch → trainer step → weight sync
// → evaluation, once per step (the starting policy is evaluated before the first). The rollout is the
// orchestrator on the real stack (src/rollout/async-rollout.ts):
// in sync mode it admits one iteration of groups and waits for the step; in async mode it goes on while the
// trainer trains, within the window and the staleness bound. The batch is built once (build-batch.ts: the
// configured estimator, merged multi-call samples, the prefix tree), exported, and that same batch is what the
// Trainer port steps on (reference-trainer.ts in process, external-trainer.ts over the trainer protocol).
import { buildTrainingBatch, type BuiltBatch } from "../batch/build-batch.js";
import type { Clock } from "../core/clock.js";
import type { OrchestratedRollout, RolloutEnd } from "../rollout/async-rollout.js";
import type { HeldOutScore } from "./held-out-eval.js";
import { InfrastructureWatch } from "./infrastructure-failure.js";
import { batchStaleness, batchStats, meanRewardComponents, type IterationResult } from "./iteration-result.js";
import type { Trainer, WeightSync } from "./trainer-port.js";

/** What the loop needs of the rollout (OrchestratedRollout; tests may script it). */
export type RolloutSource = Pick<OrchestratedRollout, "next" | "beginSync" | "published" | "skipped" | "finish">;

export interface TrainLoopOptions {
  rollout: RolloutSource;
  /** The last step (iteration) number; fewer are run when the dataset drains. */
  steps: number;
  /**
   * The first step's number (default 1): a resumed run (`arbor run --resume`) starts after the steps it has
   * done, so step numbers, exported batches and evaluations go on where the killed run stopped.
   */
  firstStep?: number;
  /** The batch builder's estimator (estimators/registry.ts) and its options. */
  estimator: string;
  estimatorOptions?: Record<string, unknown>;
  /** Absent: a plain rollout (each batch is built and exported, nothing is trained). */
  trainer?: Trainer;
  weights: WeightSync;
  /** Writes the batch the trainer will get (JSONL of its samples); returns the path. */
  exportBatch: (step: number, built: BuiltBatch) => Promise<string>;
  /**
   * Evaluation of the policy the engines serve: once before step 1 (step 0, the starting version), then after
   * each step's weight sync with the version the engines now serve; `last` on the run's last step. A score it
   * returns (held-out-eval.ts) goes into that step's record. Nothing trains while it runs.
   */
  evaluate?: (step: number, version: number, last: boolean) => Promise<HeldOutScore | undefined | void>;
  clock: Clock;
  /**
   * Each step's record once its weights are served, before its held-out evaluation (no `heldOut` yet): the CLI
   * records the step as trained, so that a kill during the evaluation does not lose it.
   */
  onTrained?: (r: IterationResult) => void;
  /** Each step's record as soon as it is complete (the CLI prints a line). */
  onStep?: (r: IterationResult) => void;
}

export interface TrainLoopResult {
  iterations: IterationResult[];
  /** How the rollout ended: every admitted program has an outcome. */
  end: RolloutEnd;
  /** Wall time from the first admission to the end, ms. */
  rolloutMs: number;
  /** The starting policy's evaluation (step 0), when `evaluate` returned one. */
  heldOutStart?: HeldOutScore;
}

/** Run the loop; the rollout is finished (every program ended) before it returns or throws. */
export async function runTrainLoop(o: TrainLoopOptions): Promise<TrainLoopResult> {
  const iterations: IterationResult[] = [];
  const started = o.clock.now();
  let stepStart = started;
  let heldOutStart: HeldOutScore | undefined;
  const first = o.firstStep ?? 1;
  const infrastructure = new InfrastructureWatch();
  try {
    // 0. Evaluation of the starting policy: the first rollout may already run, but no weights change before it ends.
    heldOutStart = (await o.evaluate?.(0, o.trainer?.version ?? 0, false)) ?? undefined;
    for (let step = first; step <= o.steps; step++) {
      // 1. Rollout and 2. rewards: programs run and are rewarded as they end, until the orchestrator has a batch.
      const taken = await o.rollout.next();
      if (taken === undefined) break; // drained, aborted or failed: finish() below says which
      const failed = infrastructure.check(step, taken.trajectories);
      if (failed) throw failed;
      const trainStart = o.clock.now();
      // 3. Batch: built once; the file and the trainer get the same samples.
      const built = buildTrainingBatch({ id: taken.id, trajectories: taken.trajectories, groups: taken.groups, estimator: o.estimator, ...(o.estimatorOptions ? { estimatorOptions: o.estimatorOptions } : {}), mode: "merged" });
      const batchPath = await o.exportBatch(step, built);
      // 4. Trainer step.
      const update = await o.trainer?.step(built);
      // 5. Weight sync: every engine serves the new version before any program reports against it.
      if (update?.stepped && o.rollout.beginSync(update.version)) {
        if (!update.synced && update.checkpoint !== undefined) await o.weights.load(update.checkpoint, update.version);
        o.rollout.published(update.version);
      } else o.rollout.skipped();
      // 6. Evaluation of the policy the engines now serve: timed on its own, not as part of the training step.
      const evalStart = o.clock.now();
      const trained: IterationResult = {
        iteration: step,
        runId: taken.groups[0]?.runId ?? taken.id,
        stats: batchStats(taken.trajectories),
        rewardComponents: meanRewardComponents(taken.trajectories),
        batchPath,
        samples: built.batch.samples.length,
        // The agents' tool calls: Arbor's own events (env setup, hygiene, a worker's judgement) are not counted.
        toolCalls: taken.trajectories.reduce((n, t) => n + t.tools.filter((x) => !x.tool.startsWith("arbor:")).length, 0),
        rolloutMs: Math.max(1, trainStart - stepStart),
        trainMs: evalStart - trainStart,
        policyVersion: taken.batch.version,
        ...(update ? { update } : {}),
        staleness: batchStaleness(taken),
      };
      o.onTrained?.(trained);
      const heldOut = (await o.evaluate?.(step, update?.version ?? taken.batch.version, step === o.steps)) ?? undefined;
      const r: IterationResult = heldOut ? { ...trained, heldOut, evalMs: o.clock.now() - evalStart } : trained;
      // The next rollout runs on the new weights from the evaluation's start, beside it (the orchestrator admits again
      // once they are published): its wall time starts there, as the first one's starts beside the step-0 evaluation.
      stepStart = evalStart;
      iterations.push(r);
      o.onStep?.(r);
    }
  } catch (e) {
    // Every admitted program still gets its outcome; the rollout's own first failure wins.
    await o.rollout.finish("aborted", e);
    throw e;
  }
  const end = await o.rollout.finish(iterations.length >= o.steps - first + 1 ? "steps" : "drained");
  return { iterations, end, rolloutMs: Math.max(1, o.clock.now() - started), ...(heldOutStart ? { heldOutStart } : {}) };
}
