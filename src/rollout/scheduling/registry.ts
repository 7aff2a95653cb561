// Rollout scheduling policies by name (config `rollout.scheduler`): plain factories, one per file.
import { ArborError } from "../../core/errors.js";
import { createDividedFifoScheduler } from "./divided-fifo.js";
import { createFifoGroupScheduler } from "./fifo-group.js";
import { createOracleLfsScheduler } from "./oracle-lfs.js";
import { createSeerScheduler } from "./seer.js";
import type { RolloutScheduler, SchedulerOptions } from "./types.js";

const POLICIES: Record<string, (opts: SchedulerOptions) => RolloutScheduler> = {
  "fifo-group": () => createFifoGroupScheduler(),
  "divided-fifo": (opts) => createDividedFifoScheduler(opts),
  seer: (opts) => createSeerScheduler(opts),
  "oracle-lfs": (opts) => createOracleLfsScheduler(opts),
};

/** Names of the registered policies. */
export const rolloutSchedulerNames: readonly string[] = Object.keys(POLICIES);

/** Create a policy by name; an unknown name is an ArborError listing the known ones. */
export function createRolloutScheduler(name: string, opts: SchedulerOptions = {}): RolloutScheduler {
  const make = Object.hasOwn(POLICIES, name) ? POLICIES[name] : undefined;
  if (make === undefined) throw new ArborError(`unknown rollout scheduler '${name}' (known: ${rolloutSchedulerNames.join(", ")})`, "config");
  return make(opts);
}
