// The run-time half of held-out evaluation: each held-out (task, sample) runs as a program exactly as the
// rollout runs its programs (the ProgramRunner: created at the gateway, its calls served by the engines and
// recorded, its sandbox, its env check) and is scored by the outcome reward (1 = solved). Its programs go to
// a store run of their own (`<run>-eval`, one group per version and task, marked held-out in its stored config
// so that `arbor export` builds no batch from it) and are handed to no orchestrator, so no held-out program can
// ever reach a training batch; their outcome is stored as their reward.
import type { Clock } from "../core/clock.js";
import { SOLVED_OUTCOME } from "../core/estimator-options.js";
import { heldOutRunConfigJson } from "../core/held-out-run.js";
import type { Group } from "../core/types.js";
import type { Task } from "../envs/env.js";
import { createOutcomeReward } from "../reward/outcome.js";
import type { ProgramRunner, ProgramRunOptions } from "../rollout/sync-rollout.js";
import type { TrajectoryStore } from "../store/trajectory-store.js";
import type { HeldOutRun } from "./held-out-eval.js";

export interface HeldOutProgramsOptions {
  /** The store run of the held-out programs (e.g. `${runId}-eval`), created at the first program. */
  runId: string;
  /** The training run's name and config, and its id (`of`) the evaluation belongs to. */
  run: { name: string; configJson: string; of: string };
  programs: ProgramRunner;
  /** The rollout's program options (gateway, env, agent, limits, seed, signal …); runId and temperature are set here. */
  options: Omit<ProgramRunOptions, "sandboxes" | "runId" | "temperature">;
  temperature: number;
  samples: number;
  store: TrajectoryStore;
  clock: Clock;
}

/** Runs held-out programs for {@link HeldOutEvaluation}; `close` finishes their store run. */
export interface HeldOutPrograms {
  run: HeldOutRun;
  close(): Promise<void>;
}

/** The held-out program runner of a run; see the file header. */
export function heldOutPrograms(o: HeldOutProgramsOptions): HeldOutPrograms {
  const outcome = createOutcomeReward();
  let created: Promise<void> | undefined;
  // The groups of the version being scored (one version at a time: the loop waits for each evaluation).
  const groups = new Map<string, Promise<Group>>();
  let groupsVersion: number | undefined;
  // Marked as held-out in its stored config: `arbor export` builds no batch from it either.
  const configJson = heldOutRunConfigJson(o.run.configJson, o.run.of);
  const runCreated = (): Promise<void> => (created ??= o.store.createRun({ id: o.runId, name: `${o.run.name} (held-out evaluation)`, configJson, startedAt: o.clock.now() }));
  const groupOf = (task: Task, taskIndex: number, version: number): Promise<Group> => {
    if (version !== groupsVersion) {
      groups.clear();
      groupsVersion = version;
    }
    const id = `${o.runId}/v${version}/t${taskIndex}`;
    let g = groups.get(id);
    if (g === undefined) {
      const group: Group = { id, runId: o.runId, taskId: task.id, programIds: Array.from({ length: o.samples }, (_, s) => `${id}/s${s}`) };
      g = runCreated()
        .then(() => o.store.createGroup(group))
        .then(() => group);
      groups.set(id, g);
    }
    return g;
  };
  return {
    run: async (task, taskIndex, sample, version) => {
      const group = await groupOf(task, taskIndex, version);
      const programId = group.programIds[sample] as string;
      // The seed comes from the task and the sample index (sync-rollout.ts), so every version samples alike.
      const ended = await o.programs.run({ ...o.options, runId: o.runId, temperature: o.temperature }, task, group, programId, sample);
      const score = ended.zeroReward ? 0 : (outcome.compute(ended.ctx) as number);
      await o.store.setReward(programId, { total: score, components: { outcome: score } });
      return score >= SOLVED_OUTCOME;
    },
    close: async () => {
      if (created === undefined) return;
      await created;
      await o.store.finishRun(o.runId, o.clock.now());
    },
  };
}
