// The run's WeightSync over every engine it serves from: the in-process engines (POST /v1/load_weights,
// weight-sync.ts) and external engines behind a SyncedBackend (SGLang, vLLM, a managed llama-server; each
// through its own API). A checkpoint is converted once into each format an engine needs (GGUF ⇄ HF). An
// external engine that fails to load is out of rotation from then on (its SyncedBackend is retired, with the
// reason logged); the load fails, naming every engine and why, only when no engine serves the new version — an
// in-process engine that fails fails the load at once, as before (it shares the run's process and files).
import type { SyncedBackend } from "../backends/weights/synced-backend.js";
import { ArborError } from "../core/errors.js";
import { checkpointAs, type CheckpointFormat } from "../model/hf/checkpoint-formats.js";
import type { WeightSync } from "./trainer-port.js";
import { loadWeightsEverywhere, type InFlightOnSwitch, type SyncedEngine } from "./weight-sync.js";

/** Options of {@link fleetWeightSync}. */
export interface FleetWeightSyncOptions {
  /** In-process engines (GGUF over their HTTP API). */
  engines: readonly SyncedEngine[];
  /** Their default in-flight mode. */
  inFlight: InFlightOnSwitch;
  /** External engines, each with its loader. */
  external: readonly SyncedBackend[];
  log?: (line: string) => void;
}

/** A WeightSync over in-process and external engines; see the module header for what a failure does. */
export function fleetWeightSync(o: FleetWeightSyncOptions): WeightSync {
  return {
    async load(modelPath, version) {
      const live = o.external.filter((b) => b.retired === undefined);
      const formats = new Set<CheckpointFormat>(live.map((b) => b.format));
      if (o.engines.length > 0) formats.add("gguf");
      const paths = new Map<CheckpointFormat, string>();
      for (const f of formats) paths.set(f, checkpointAs(modelPath, f));
      const inProcess = o.engines.length > 0 ? loadWeightsEverywhere(o.engines, paths.get("gguf") as string, version, o.inFlight) : Promise.resolve();
      const results = await Promise.allSettled(live.map((b) => b.switchTo(paths.get(b.format) as string, version)));
      await inProcess;
      const failed = results.flatMap((r, i) => (r.status === "rejected" ? [`${(live[i] as SyncedBackend).name}: ${(r.reason as Error).message}`] : []));
      for (const f of failed) o.log?.(`weights  out of rotation: ${f}`);
      const serving = o.engines.length + results.filter((r) => r.status === "fulfilled").length;
      if (serving === 0) {
        const out = o.external.filter((b) => !live.includes(b)).map((b) => `${b.name}: ${b.retired as string}`);
        throw new ArborError(`weight sync: no engine serves policy version ${version} (${[...failed, ...out].join("; ") || "no engine configured"})`, "weight_sync");
      }
    },
  };
}
