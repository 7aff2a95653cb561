// `divided-fifo`: divided rollout alone — Seer's first ablation step (TECHNIQUES §B5: "divided rollout 1.41×").
// Requests are served in arrival order (group by group, as group-bound FIFO serves them), but each chunk is
// placed on its own, on the instance with the most free KV, instead of a whole group being bound to one
// instance for its whole budget. No length estimate, no probes: what divided rollout buys without
// context-aware scheduling.
import { createDividedScheduler } from "./divided-scheduler.js";
import type { RolloutScheduler, SchedulerOptions } from "./types.js";

/** Create the divided-fifo policy. */
export function createDividedFifoScheduler(opts: SchedulerOptions = {}): RolloutScheduler {
  // An empty key: the divided scheduler's tie-break is arrival order (group, then index in the group).
  return createDividedScheduler("divided-fifo", { key: () => [] }, opts);
}
