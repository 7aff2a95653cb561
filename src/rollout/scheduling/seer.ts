// `seer`: Seer's context-aware scheduling (TECHNIQUES §B5) over divided rollout. Each group's first
// request is a speculative probe: probes go first, shortest-generated-first, so every group soon
// has one finished sample. A group's length estimate L̂g is the longest finished sample so far
// (the whole budget until one finishes); all other requests run longest-L̂g-first, so the long
// groups start early instead of forming the tail. The starvation guard of the divided scheduler
// serves anything left waiting too long.
import { createDividedScheduler } from "./divided-scheduler.js";
import type { RolloutScheduler, SchedulerOptions } from "./types.js";

/** Create the seer policy. */
export function createSeerScheduler(opts: SchedulerOptions = {}): RolloutScheduler {
  /** Longest finished sample per group. */
  const estimate = new Map<string, number>();
  /** Groups whose probe has finished. */
  const probed = new Set<string>();
  return createDividedScheduler(
    "seer",
    {
      key(e) {
        if (e.req.index === 0 && !probed.has(e.req.groupId)) return [0, e.generated];
        return [1, -(estimate.get(e.req.groupId) ?? e.req.maxTokens)];
      },
      onFinished(e) {
        if (e.req.index === 0) probed.add(e.req.groupId);
        const prev = estimate.get(e.req.groupId);
        if (prev === undefined || e.generated > prev) estimate.set(e.req.groupId, e.generated);
      },
      onGroupDone(groupId) {
        estimate.delete(groupId);
        probed.delete(groupId);
      },
    },
    opts,
  );
}
