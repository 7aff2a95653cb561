// `arbor serve engine --cluster cluster.yaml --name e0`: one engine of a deployment file, alone in its
// process, on its own host and port, with /healthz, /readyz and a graceful drain on SIGTERM.
import { lineLog, processLog } from "../core/logger.js";
import { clusterEngine, loadClusterConfig } from "../core/cluster-config.js";
import { realClock } from "../core/real-clock.js";
import type { EngineRole } from "../engine/http/kv-handoff.js";
import { startEngineServer } from "../engine/server.js";
import { checkCostProfile, checkModelFile, engineServerOptions, policyPath, withV0Draft } from "./engine-start.js";
import { serveUntilSignalled } from "./service-lifecycle.js";

export interface ServeEngineOptions {
  cluster: string;
  /** The engine's `name` in the cluster file. */
  name: string;
  /** Overrides the engine's `role` in the file (prefill, decode or mixed). */
  role?: EngineRole;
  /** Longest wait for in-flight requests on SIGTERM, ms. */
  drainMs: number;
  log?: (line: string) => void;
}

/** Start the named engine and serve until a signal; resolves once drained and closed. */
export async function serveEngineCommand(o: ServeEngineOptions): Promise<void> {
  const log = o.log ?? lineLog(processLog("engine"));
  const cfg = loadClusterConfig(o.cluster);
  const fileEngine = clusterEngine(cfg, o.name);
  const index = cfg.engines.indexOf(fileEngine);
  const e = o.role !== undefined ? { ...fileEngine, role: o.role } : fileEngine;
  checkCostProfile(fileEngine, index);
  const modelPath = policyPath(cfg.model, log);
  checkModelFile(modelPath);
  // As `arbor run`: each engine of the file draws from its own seed.
  const engine = await startEngineServer({ ...engineServerOptions(withV0Draft(e, modelPath, 1, log), { modelPath, host: e.host, seed: cfg.seed + index, clock: realClock }), logger: processLog("engine") });
  const pool = e.kvPool ? `, KV pool ${e.kvPool.url} "${e.kvPool.name}"` : "";
  log(`engine ${e.name} listening on ${engine.url} (OpenAI API at ${engine.url}/v1; role ${e.role}, ${e.executor}, model ${modelPath}, served as ${e.servedModelName}${pool}; /healthz, /readyz)`);
  await serveUntilSignalled({ name: `engine ${e.name}`, probes: engine.probes, drainMs: o.drainMs, close: () => engine.close(), log });
}
