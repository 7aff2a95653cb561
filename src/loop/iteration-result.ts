// What the training loop records of each step, for whoever reports it (the CLI's lines, plot and summary):
// the batch's programs (stats, mean reward components), the exported batch, times, policy versions, the
// trainer's update and the batch's staleness.
import type { Trajectory } from "../core/types.js";
import type { TakenBatch } from "../rollout/async-rollout.js";
import { TERMINATION_KINDS, type RunStats } from "../store/trajectory-store.js";
import type { HeldOutScore } from "./held-out-eval.js";
import type { RlUpdate } from "./rl-update.js";

/** One step of the loop: a rollout batch and the policy update that followed it. */
export interface IterationResult {
  iteration: number;
  /** The store run of the batch's programs (sync: one per iteration; async: the run's). */
  runId: string;
  /** The batch's programs. */
  stats: RunStats;
  /** Mean of each reward component over the iteration's rewarded programs (e.g. outcome, process). */
  rewardComponents?: Record<string, number>;
  /** The exported batch: exactly the samples the trainer was given. */
  batchPath: string;
  samples: number;
  toolCalls: number;
  /**
   * Wall time from the weights this batch was sampled on being served (the loop's start for the first step) until
   * the batch was taken: a held-out evaluation of those weights runs beside the rollout, and the batch is taken
   * only once it has ended (no weights change while it runs), so its time is included.
   */
  rolloutMs: number;
  /** From the batch taken to the new weights served: building and exporting the batch, the trainer step, the weight sync. */
  trainMs: number;
  /** Policy version the trainer held when it took the batch (the engines served it, or older ones in async mode). */
  policyVersion: number;
  update?: RlUpdate;
  /** The batch's token staleness (trainer version − token version) and its tokens' versions (0 and one version in sync mode). */
  staleness?: { mean: number; max: number; versions: number[] };
  /** Held-out evaluation of the version the engines serve after this step (held-out-eval.ts), when one was due. */
  heldOut?: HeldOutScore;
  /** How long that evaluation took (with `heldOut`): after trainMs, beside the next step's rollout. */
  evalMs?: number;
}

/** Mean of each reward component over the rewarded trajectories (a component a program lacks counts as 0). */
export function meanRewardComponents(ts: readonly Trajectory[]): Record<string, number> {
  const rewarded = ts.flatMap((t) => (t.reward ? [t.reward.components] : []));
  const names = [...new Set(rewarded.flatMap((c) => Object.keys(c)))].sort();
  return Object.fromEntries(names.map((n) => [n, rewarded.reduce((a, c) => a + (c[n] ?? 0), 0) / rewarded.length]));
}

/** RunStats of a batch's trajectories (the store's are per run; a step's line describes its batch). */
export function batchStats(ts: readonly Trajectory[]): RunStats {
  const terminations = Object.fromEntries(TERMINATION_KINDS.map((k) => [k, 0])) as RunStats["terminations"];
  let unfinished = 0;
  for (const t of ts) {
    const k = t.program.termination?.kind;
    if (k === undefined) unfinished++;
    else terminations[k]++;
  }
  const rewarded = ts.filter((t) => t.reward !== undefined);
  const calls = ts.flatMap((t) => t.calls);
  return {
    programs: ts.length,
    unfinished,
    calls: calls.length,
    promptTokens: calls.reduce((n, c) => n + c.promptTokenIds.length, 0),
    outputTokens: calls.reduce((n, c) => n + c.outputTokenIds.length, 0),
    terminations,
    rewarded: rewarded.length,
    meanReward: rewarded.length === 0 ? null : rewarded.reduce((n, t) => n + (t.reward?.total ?? 0), 0) / rewarded.length,
  };
}

/** The staleness of a taken batch, with the sorted versions its tokens came from. */
export function batchStaleness(b: TakenBatch): NonNullable<IterationResult["staleness"]> {
  const vs = new Set(b.batch.groups.flatMap((g) => g.trajectories.flatMap((t) => t.versions.map((s) => s.version))));
  return { mean: b.batch.meanStaleness, max: b.batch.maxStaleness, versions: [...vs].sort((x, y) => x - y) };
}
