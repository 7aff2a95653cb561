// Maps the run config's `rollout` section onto the orchestrator's and the scheduling policy's
// options, so `arbor run` (and the simulator) build both from one validated source.
import type { RunConfig } from "../../core/config.js";
import { createRolloutScheduler } from "../scheduling/registry.js";
import type { RolloutScheduler, SchedulerOptions } from "../scheduling/types.js";
import type { OrchestratorOptions } from "./orchestrator.js";

/** The config-derived part of OrchestratorOptions. */
export type OrchestratorSettings = Pick<OrchestratorOptions, "mode" | "groupSize" | "batchGroups" | "maxInFlightGroups" | "window" | "maxStaleness">;

/**
 * Orchestrator settings from `rollout`; `tasks` is the dataset size (a sync batch defaults to all
 * of its groups).
 */
export function orchestratorSettings(rollout: RunConfig["rollout"], tasks: number): OrchestratorSettings {
  const s: OrchestratorSettings = {
    mode: rollout.mode,
    groupSize: rollout.groupSize,
    batchGroups: rollout.batchGroups ?? Math.max(1, tasks),
  };
  if (rollout.maxInFlightGroups !== undefined) s.maxInFlightGroups = rollout.maxInFlightGroups;
  if (rollout.window !== undefined) s.window = rollout.window;
  if (rollout.maxStaleness !== undefined) s.maxStaleness = rollout.maxStaleness;
  return s;
}

/** The scheduling policy `rollout.scheduler` names, with its options. */
export function schedulerFromConfig(rollout: RunConfig["rollout"]): RolloutScheduler {
  const { policy, chunkTokens, starvationMs, kvAffinity } = rollout.scheduler;
  const opts: SchedulerOptions = { kvAffinity };
  if (chunkTokens !== undefined) opts.chunkTokens = chunkTokens;
  if (starvationMs !== undefined) opts.starvationMs = starvationMs;
  return createRolloutScheduler(policy, opts);
}
