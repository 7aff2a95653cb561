// `kind: agent` workloads as SimScenarios (issue 18): the workload file's programs, drawn from the
// seed at the requested scale, run through the production gateway path (src/sim/gateway-sim.ts) once
// per system (agent-systems.ts). Also runs programs that come from elsewhere (a replayed store).
import { getCostProfile } from "../../engine/costmodel/profile.js";
import type { AgentProgramSpec } from "../agent-workload.js";
import { runGatewaySim } from "../gateway-sim.js";
import { generateAgentPrograms } from "./agent-programs.js";
import { agentSystemResult } from "./agent-result.js";
import { AGENT_SYSTEMS, agentSystem } from "./agent-systems.js";
import { parseAgentWorkload, type AgentWorkloadSpec } from "./agent-workload-spec.js";
import { checkRunOptions, scaled, type SimRunOptions, type SimScenario } from "./scenario.js";
import type { SimSystemResult, SimWorkloadInfo } from "./sim-report.js";

/** The agent workload files shipped in src/sim/workloads/ (kind: agent). */
export const AGENT_WORKLOAD_FILES = ["thunder-swe.yaml", "thunder-openhands.yaml", "search-agent.yaml"] as const;

/** Host-memory tier per engine when the file gives none: 4 × the L1 KV (an H100 node has 2 TB of DRAM for 8 × 80 GB HBM). */
const DEFAULT_L2_FACTOR = 4;

/** The cluster part of a workload file (agent and replay share it). */
export type AgentCluster = AgentWorkloadSpec["cluster"];

/**
 * Run `programs` for one system on the cluster scaled to `scale` (engines scale with the programs,
 * so the KV pressure per engine stays that of the full run).
 */
export async function runAgentSystem(system: string, cluster: AgentCluster, programs: readonly AgentProgramSpec[], o: SimRunOptions): Promise<SimSystemResult> {
  const s = agentSystem(system);
  const profile = getCostProfile(cluster.profile);
  const kvTokensPerEngine = cluster.kvTokensPerEngine ?? profile.hbmKvCapacityTokens;
  const result = await runGatewaySim(programs, {
    engines: agentEngines(cluster, o.scale),
    kvTokensPerEngine,
    routing: s.routing,
    pausing: s.pausing === false ? false : s.pausing,
    profile: cluster.profile,
    maxNumSeqs: cluster.maxNumSeqs,
    seed: o.seed,
    ...(s.l2 ? { l2TokensPerEngine: cluster.l2TokensPerEngine ?? kvTokensPerEngine * DEFAULT_L2_FACTOR } : {}),
    pauseTo: s.pauseTo,
    ...(o.onAdvance === undefined ? {} : { onProgramEnded: (n: number) => o.onAdvance?.(n, programs.length) }),
  });
  const requests = programs.reduce((n, p) => n + p.turns.length, 0);
  return agentSystemResult(s.name, s.description, result, requests);
}

/** The engines a run at `scale` gets: they scale with the programs (runAgentSystem, agentScale). */
function agentEngines(cluster: AgentCluster, scale: number): number {
  return scaled(cluster.engines, scale);
}

/** The scale figures the report states for a cluster at `scale` running `programs` programs. */
export function agentScale(cluster: AgentCluster, programs: number, scale: number): Record<string, number | string> {
  const profile = getCostProfile(cluster.profile);
  const engines = agentEngines(cluster, scale);
  return {
    engines,
    gpus: engines * profile.tensorParallel,
    programs,
    profile: cluster.profile,
    gpu: profile.gpu,
    kvTokensPerEngine: cluster.kvTokensPerEngine ?? profile.hbmKvCapacityTokens,
    maxNumSeqs: cluster.maxNumSeqs,
  };
}

/** An agent workload file as a scenario over the agent systems. */
export function agentScenario(spec: AgentWorkloadSpec): SimScenario {
  // Programs as run generates them.
  const scaleAt = (scale: number): Record<string, number | string> => ({
    ...agentScale(spec.cluster, scaled(spec.programs.count, scale), scale),
    turns: spec.programs.turns.join("–"),
    outputTokens: spec.programs.outputTokens.join("–"),
    toolOutputTokens: spec.programs.toolOutputTokens.join("–"),
    toolLatency: `lognormal median ${spec.programs.toolLatency.medianMs} ms, σ ${spec.programs.toolLatency.sigma}, cap ${spec.programs.toolLatency.maxMs} ms`,
  });
  const info: SimWorkloadInfo = { name: spec.name, kind: "agent", description: spec.description, sources: spec.sources, scale: scaleAt(1) };
  return {
    info,
    systems: AGENT_SYSTEMS.map((s) => s.name),
    scaleAt: async (scale) => scaleAt(scale),
    async run(system, o) {
      checkRunOptions(o);
      const programs = generateAgentPrograms(spec.programs, scaled(spec.programs.count, o.scale), o.seed);
      return runAgentSystem(system, spec.cluster, programs, o);
    },
  };
}

/** Parse a `kind: agent` document and build its scenario (for the loader's dispatch on `kind`). */
export function agentScenarioFromDoc(doc: unknown, file: string): SimScenario {
  return agentScenario(parseAgentWorkload(doc, file));
}
