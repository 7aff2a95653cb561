// What `arbor run` checks before it starts anything: the sandbox, the routing and the estimator the config
// names, what a resumed or clustered run supports, and the user's agent module against the agents' contract. A
// bad config fails here, with the field and the reason, instead of after engines and sandboxes have started (or,
// for the estimator, after the first rollout).
import { fromEnvTool } from "../agents/agent-tool.js";
import { loadModuleAgent } from "../agents/module-agent.js";
import { createEstimator } from "../batch/estimators/registry.js";
import type { ClusterConfig } from "../core/cluster-config.js";
import type { RunConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import type { Environment } from "../envs/env.js";
import { checkRoutingConfig } from "../gateway/routing/registry.js";
import { bwrapAvailable } from "../sandbox/bwrap.js";

/** Throws an ArborError for a config this run cannot carry out (the sandbox, routing, estimator, async, `--cluster`). */
export function checkRunStart(cfg: RunConfig, opts: { cluster?: ClusterConfig }): void {
  const { cluster } = opts;
  // The embedded gateway's routing (a cluster's gateway is a service of its own, checked where it starts).
  if (cluster === undefined) checkRoutingConfig(cfg.gateway.routing);
  // The estimator and its options, which the first batch would otherwise meet after a whole rollout.
  if (cfg.train) createEstimator(cfg.train.estimator, cfg.train.estimatorOptions);
  if (cfg.sandbox.provider === "bwrap" && cluster === undefined) {
    const bw = bwrapAvailable();
    if (!bw.ok) throw new ArborError(bw.message, "sandbox");
  }
  if (cfg.rollout.mode === "async" && cfg.train === undefined) {
    // Async batches exist only for a trainer to take them.
    throw new ArborError("rollout.mode: 'async' needs `train` (its trainer takes the batches); add train or use mode: sync", "config");
  }
  if (cluster !== undefined && cfg.eval?.temperature !== undefined && cfg.eval.temperature !== cfg.agent.temperature) {
    // Workers sample every program at the run config's agent.temperature (the work message carries no other).
    throw new ArborError(`eval.temperature: with --cluster, held-out programs run on workers at agent.temperature (${cfg.agent.temperature}); remove eval.temperature or set it to that`, "config");
  }
}

/**
 * The user's agent module (`agent.module`, white-box agents), checked against the agents' contract (its shape,
 * then defineAgent's checks) on the definition the tool loop would give it. Each program loads it again (the
 * module cache keeps that cheap), so a worker of a cluster plays it the same way.
 */
export async function checkAgentModule(cfg: RunConfig, env: Environment, log?: (line: string) => void): Promise<void> {
  if (!(cfg.agent.kind === "white-box" && cfg.agent.module !== undefined)) return;
  const def = await loadModuleAgent(cfg.agent.module, {
    name: "tool-agent",
    tools: env.tools().map(fromEnvTool),
    toolMode: cfg.agent.toolMode,
    limits: { maxTurns: cfg.agent.maxTurns, maxTokensPerCall: cfg.agent.maxTokensPerCall, maxTotalTokens: cfg.agent.maxTotalTokens },
  });
  log?.(`agent    ${def.name} (${cfg.agent.module})`);
}
