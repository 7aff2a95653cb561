// The systems a rollout workload runs under: named configurations of the same simulator (the real
// orchestrator, scheduling policies, vLLM-style scheduler and KV manager on cost-model engines), differing
// only in the rollout scheduling policy, its divided-rollout chunk and whether engines speculate (Seer's
// grouped drafts, modelled by sim/grouped-speculation.ts).
import type { SchedulerOptions } from "../../rollout/scheduling/types.js";
import { SEER_GROUPED_SPECULATION, type GroupedSpeculation } from "../grouped-speculation.js";

/** One named system on a rollout workload. */
export interface RolloutSystem {
  name: string;
  description: string;
  /** Rollout scheduling policy (rollout/scheduling/registry.ts). */
  policy: string;
  /** Divided rollout chunk, tokens; undefined = whole requests (no divided rollout). */
  chunkTokens?: number;
  options?: Pick<SchedulerOptions, "starvationMs" | "kvAffinity">;
  /** Grouped speculative decoding on every engine; undefined = none. */
  speculation?: GroupedSpeculation;
}

/** What the workload fixes for every system: Seer's chunk size. */
export interface RolloutSystemParams {
  chunkTokens: number;
  /** Arbor's tuned chunk (the workload file may set it; default half of chunkTokens). */
  arborChunkTokens?: number;
}

/** The systems, in the order `arbor sim` lists them (the first is the baseline). */
export function rolloutSystems(p: RolloutSystemParams): RolloutSystem[] {
  return [
    {
      name: "verl-like",
      description: "veRL-like: group-bound FIFO (fifo-group: each group on the least-loaded instance, whole budget), no divided rollout",
      policy: "fifo-group",
    },
    {
      name: "seer-divided",
      description: `Seer's first ablation step: divided rollout alone (${p.chunkTokens}-token chunks, each on the instance with the most free KV, arrival order, no length estimate)`,
      policy: "divided-fifo",
      chunkTokens: p.chunkTokens,
    },
    {
      name: "seer",
      description: `Seer: divided rollout in ${p.chunkTokens}-token chunks, context-aware scheduling (probe first, longest group estimate first), global KV pool`,
      policy: "seer",
      chunkTokens: p.chunkTokens,
    },
    {
      name: "seer-specdec",
      description: `Seer with its last ablation step: + grouped speculative decoding (drafts from the group's suffix tree, acceptance growing with finished siblings as Seer measured, ${SEER_GROUPED_SPECULATION.maxSpecTokens} draft tokens under the adaptive budget)`,
      policy: "seer",
      chunkTokens: p.chunkTokens,
      speculation: SEER_GROUPED_SPECULATION,
    },
    {
      name: "oracle",
      description: `oracle: longest-first with the true output lengths (oracle-lfs) over the same ${p.chunkTokens}-token divided rollout`,
      policy: "oracle-lfs",
      chunkTokens: p.chunkTokens,
    },
    {
      name: "arbor",
      description: `Arbor: the seer policy with its tuned divided rollout (${p.arborChunkTokens ?? p.chunkTokens / 2}-token chunks, KV affinity for continuations) and grouped speculative decoding`,
      policy: "seer",
      chunkTokens: p.arborChunkTokens ?? p.chunkTokens / 2,
      options: { kvAffinity: true },
      speculation: SEER_GROUPED_SPECULATION,
    },
  ];
}
