// The systems `arbor sim` compares on agent workloads (issue 18): named configurations of the same
// production gateway path (router preset, ThunderAgent pause gate, engine KV tiers), never separate code.
import { ArborError } from "../../core/errors.js";
import type { PauseTarget } from "../../engine/scheduler/scheduler.js";
import type { PauseGateConfig } from "../../gateway/pausing/pause-gate.js";

export interface AgentSystem {
  name: string;
  /** One line for the report: what the system is made of. */
  description: string;
  /** Gateway routing preset (src/gateway/routing/registry.ts). */
  routing: string;
  /** ThunderAgent pausing: false = off, else the gateway's `pausing` settings. */
  pausing: false | Omit<PauseGateConfig, "capacities">;
  /** Give each engine its host-memory KV tier (L2). */
  l2: boolean;
  /** Where a paused program's KV goes on the engine. */
  pauseTo: PauseTarget;
}

/** The systems, in report order (the first is the baseline). */
export const AGENT_SYSTEMS: readonly AgentSystem[] = [
  {
    name: "verl-like",
    description: "least-load routing per call, no pausing, prefix cache in HBM only (veRL's agent loop over vLLM)",
    routing: "least-load",
    pausing: false,
    l2: false,
    pauseTo: "drop",
  },
  {
    name: "sglang-router",
    description: "SGLang router's cache_aware policy (prefix affinity with load balance thresholds), no pausing, HBM prefix cache",
    routing: "prefix-affinity",
    pausing: false,
    l2: false,
    pauseTo: "drop",
  },
  {
    name: "thunderagent",
    description: "ThunderAgent: program-aware placement and pause/restore with the paper's defaults (λ 1.0, Δt 5 s, decay 2^-t), KV of paused programs left evictable",
    routing: "sticky-program",
    pausing: {},
    l2: false,
    pauseTo: "drop",
  },
  {
    name: "arbor",
    description: "Arbor: ThunderAgent pausing (Δt 1 s, restored only on the engine that paused it) + sticky-program routing + host-memory KV tier (paused programs and evicted prefixes offloaded to L2, loaded back over PCIe)",
    routing: "sticky-program",
    pausing: { tickMs: 1000, restorePacking: "origin" },
    l2: true,
    pauseTo: "L2",
  },
];

/** A system by name; the error lists the known names. */
export function agentSystem(name: string): AgentSystem {
  const s = AGENT_SYSTEMS.find((x) => x.name === name);
  if (s === undefined) throw new ArborError(`sim: unknown system '${name}' for agent workloads (known: ${AGENT_SYSTEMS.map((x) => x.name).join(", ")})`, "config");
  return s;
}
