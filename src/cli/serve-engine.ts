// `arbor serve engine --cluster cluster.yaml --name e0`: one engine of a deployment file, alone in its
// process, on its own host and port, with /healthz, /readyz and a graceful drain on SIGTERM.
import { resolve } from "node:path";
import { clusterEngine, loadClusterConfig, type ClusterConfig } from "../core/cluster-config.js";
import { realClock } from "../core/real-clock.js";
import { startEngineServer } from "../engine/server.js";
import { makeModel } from "../model/made/made-models.js";
import { ensurePolicy } from "../model/policy.js";
import { serveUntilSignalled } from "./service-lifecycle.js";

export interface ServeEngineOptions {
  cluster: string;
  /** The engine's `name` in the cluster file. */
  name: string;
  /** Longest wait for in-flight requests on SIGTERM, ms. */
  drainMs: number;
  log?: (line: string) => void;
}

/** Start the named engine and serve until a signal; resolves once drained and closed. */
export async function serveEngineCommand(o: ServeEngineOptions): Promise<void> {
  const log = o.log ?? ((line: string) => console.error(line));
  const cfg = loadClusterConfig(o.cluster);
  const e = clusterEngine(cfg, o.name);
  const index = cfg.engines.indexOf(e);
  const modelPath = clusterModelPath(cfg, log);
  const engine = await startEngineServer({
    name: e.name,
    modelPath,
    policyVersion: 0,
    sequences: e.sequences,
    contextSize: e.contextSize,
    maxWaiting: e.maxWaiting,
    host: e.host,
    port: e.port,
    // As `arbor run`: each engine of the file draws from its own seed.
    seed: cfg.seed + index,
    inFlightOnWeightSwitch: e.inFlightOnWeightSwitch,
    executorKind: e.executor,
    costProfile: e.costProfile,
    servedModelName: e.servedModelName,
    gpu: e.gpu,
    ...(e.toolParser !== undefined ? { toolParser: e.toolParser } : {}),
    ...(e.reasoningParser !== undefined && e.reasoningParser !== "none" ? { reasoningParser: e.reasoningParser } : {}),
    clock: realClock,
  });
  log(`engine ${e.name} listening on ${engine.url} (OpenAI API at ${engine.url}/v1; ${e.executor}, model ${modelPath}, served as ${e.servedModelName}; /healthz, /readyz)`);
  await serveUntilSignalled({ name: `engine ${e.name}`, probes: engine.probes, drainMs: o.drainMs, close: () => engine.close(), log });
}

/** The GGUF the file's engines serve: `model.path`, else the tiny policy created (once) from `model.init`. */
function clusterModelPath(cfg: ClusterConfig, log: (line: string) => void): string {
  if (cfg.model.path !== undefined) return cfg.model.path;
  const dir = resolve(".arbor/models");
  const vocab = cfg.model.vocab;
  const policy = vocab === "arbor" ? ensurePolicy(dir, cfg.model.init) : makeModel(vocab, dir, cfg.model.init);
  log(`policy   ${policy.path} (${policy.created ? "created" : "cached"}, ${vocab} vocabulary, seed ${cfg.model.init.seed})`);
  return policy.path;
}
