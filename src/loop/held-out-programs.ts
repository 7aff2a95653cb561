// The run-time half of held-out evaluation: each held-out (task, sample) runs as a program exactly as the rollout
// runs its programs (the ProgramRunner: created at the gateway, its calls served by the engines and recorded, its
// sandbox, its env check) and is scored by the outcome reward (1 = solved). Its programs belong to the run's own
// store run (a run has one id, issue 19), in groups named like the training ones
// (`<run>/eval-v<version>/g<task index>`, `eval-v<version>-r<n>` in a run's n-th resume, programs `…/s<sample>`)
// and marked held-out in the store (`Group.heldOutVersion`), so that nothing builds a batch from them (`arbor export`,
// batch/export-store.ts) and `arbor inspect` and the dashboard tell them apart; they are handed to no
// orchestrator, so no held-out program can ever reach a training batch. Their outcome is stored as their reward.
// A program the run's abort ended has no outcome: it is reported as such (undefined), never as unsolved, and gets
// no reward.
import type { Clock } from "../core/clock.js";
import { SOLVED_OUTCOME } from "../core/estimator-options.js";
import type { Group } from "../core/types.js";
import type { Task } from "../envs/env.js";
import { createOutcomeReward } from "../reward/outcome.js";
import type { ProgramRunner, ProgramRunOptions } from "../rollout/sync-rollout.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import type { HeldOutRun } from "./held-out-eval.js";

export interface HeldOutProgramsOptions {
  /** The run's store id: the training run's own (its groups and the held-out ones share it). */
  runId: string;
  /**
   * Resolves once the store run exists (created, or reopened on resume); the rollout owns it and finishes it
   * (OrchestratedRollout.runReady). Held-out programs of version 0 may run before the rollout's first group.
   */
  runReady: () => Promise<void>;
  programs: ProgramRunner;
  /** The rollout's program options (gateway, env, agent, limits, seed, signal …); runId and temperature are set here. */
  options: Omit<ProgramRunOptions, "sandboxes" | "runId" | "temperature">;
  temperature: number;
  samples: number;
  store: TrajectoryStore;
  clock: Clock;
  /**
   * The n-th resume of the run (absent or 0: not resumed): its groups are `eval-v<version>-r<n>`, since the
   * killed attempt may have created the version's groups already (an iteration's evaluation runs before it is
   * recorded as done, so a kill during it has the iteration and its evaluation run again).
   */
  attempt?: number;
}

/** The group id of held-out task `taskIndex` at `version` in run `runId` (in its `attempt`-th resume). */
export function heldOutGroupId(runId: string, version: number, taskIndex: number, attempt = 0): string {
  return `${runId}/eval-v${version}${attempt > 0 ? `-r${attempt}` : ""}/g${taskIndex}`;
}

/** The held-out program runner of a run, for {@link HeldOutEvaluation}; see the file header. */
export function heldOutPrograms(o: HeldOutProgramsOptions): HeldOutRun {
  const outcome = createOutcomeReward();
  // The groups of the version being scored (one version at a time: the loop waits for each evaluation).
  const groups = new Map<string, Promise<Group>>();
  let groupsVersion: number | undefined;
  const groupOf = (task: Task, taskIndex: number, version: number): Promise<Group> => {
    if (version !== groupsVersion) {
      groups.clear();
      groupsVersion = version;
    }
    const id = heldOutGroupId(o.runId, version, taskIndex, o.attempt);
    let g = groups.get(id);
    if (g === undefined) {
      const group: Group = { id, runId: o.runId, taskId: task.id, programIds: Array.from({ length: o.samples }, (_, s) => `${id}/s${s}`), heldOutVersion: version, ...(o.attempt ? { attempt: o.attempt } : {}) };
      g = o
        .runReady()
        .then(() => o.store.createGroup(group))
        .then(() => group);
      groups.set(id, g);
    }
    return g;
  };
  return async (task, taskIndex, sample, version) => {
    const group = await groupOf(task, taskIndex, version);
    const programId = group.programIds[sample] as string;
    // The seed comes from the task and the sample index (sync-rollout.ts), so every version samples alike.
    const ended = await o.programs.run({ ...o.options, runId: o.runId, temperature: o.temperature }, task, group, programId, sample);
    // Ended by the run's abort (or failing while it aborted: an agent or engine error then comes from the abort):
    // the program says nothing about the policy.
    if (ended.result.termination.kind === "aborted" || o.options.signal?.aborted === true) return undefined;
    const score = ended.zeroReward ? 0 : (outcome.compute(ended.ctx) as number);
    await o.store.setReward(programId, { total: score, components: { outcome: score } });
    return score >= SOLVED_OUTCOME;
  };
}
