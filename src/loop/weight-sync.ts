// Weight sync of the training loop (the WeightSync port for in-process engines): tell every engine to serve a
// new checkpoint over its own HTTP API (POST /v1/load_weights) and confirm it does (GET /v1/policy_version),
// so the loop only tells the rollout about a version every engine serves.
import { ArborError } from "../core/errors.js";
import type { WeightSync } from "./trainer-port.js";

/** What in-flight requests do on a weight switch (the engine's `in_flight`). */
export type InFlightOnSwitch = "finish" | "abort" | "resume";

/** An engine the loop syncs: its server root (no `/v1`), e.g. http://127.0.0.1:8000. */
export interface SyncedEngine {
  name: string;
  url: string;
  /** This engine's `in_flight` (config engines[].inFlightOnWeightSwitch), instead of the call's. */
  inFlight?: InFlightOnSwitch;
}

/**
 * POST `{model_path, policy_version, in_flight}` to each engine (its own `inFlight`, else the given
 * one), then check each serves `version`.
 * Rejects with an ArborError naming the engine when one refuses, is unreachable or lags.
 */
export async function loadWeightsEverywhere(engines: readonly SyncedEngine[], modelPath: string, version: number, inFlight: InFlightOnSwitch): Promise<void> {
  const root = (u: string): string => u.replace(/\/+$/, "");
  await Promise.all(
    engines.map(async (e) => {
      let res: Response;
      try {
        res = await fetch(`${root(e.url)}/v1/load_weights`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model_path: modelPath, policy_version: version, in_flight: e.inFlight ?? inFlight }),
        });
      } catch (err) {
        throw new ArborError(`weight sync: engine ${e.name} (${e.url}) unreachable loading version ${version}: ${reason(err)}`, "weight_sync");
      }
      if (!res.ok) throw new ArborError(`weight sync: engine ${e.name} refused version ${version} (${res.status}: ${(await res.text()).slice(0, 200)})`, "weight_sync");
      const now = (await (await fetch(`${root(e.url)}/v1/policy_version`)).json()) as { policy_version?: unknown };
      if (now.policy_version !== version) {
        throw new ArborError(`weight sync: engine ${e.name} serves policy version ${String(now.policy_version)} after loading version ${version}`, "weight_sync");
      }
    }),
  );
}

/** The WeightSync of engines reached over HTTP: {@link loadWeightsEverywhere} with their default `inFlight`. */
export function engineWeightSync(engines: readonly SyncedEngine[], inFlight: InFlightOnSwitch): WeightSync {
  return { load: (modelPath, version) => loadWeightsEverywhere(engines, modelPath, version, inFlight) };
}

/** An error's message with its cause's (fetch says only "fetch failed"; the cause says why: refused, reset, timeout). */
function reason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `${err.cause.message}${(err.cause as NodeJS.ErrnoException).code ? ` (${(err.cause as NodeJS.ErrnoException).code})` : ""}` : undefined;
  return cause ? `${err.message}: ${cause}` : err.message;
}
