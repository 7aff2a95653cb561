// Weight sync of an RL loop: announce a new checkpoint to every engine over its own HTTP API
// (POST /v1/load_weights), then confirm each one serves that version (GET /v1/policy_version).
import { ArborError } from "../core/errors.js";

/** POST `{model_path, policy_version, in_flight}` to each engine and check it reports the new version. */
export async function syncWeights(engineUrls: readonly string[], modelPath: string, version: number, inFlight: "finish" | "abort" | "resume" = "finish"): Promise<void> {
  await Promise.all(
    engineUrls.map(async (url) => {
      const res = await fetch(`${url}/v1/load_weights`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model_path: modelPath, policy_version: version, in_flight: inFlight }),
      });
      if (!res.ok) throw new ArborError(`weight sync: ${url} refused version ${version} (${res.status}: ${(await res.text()).slice(0, 200)})`, "weight_sync");
      const now = (await (await fetch(`${url}/v1/policy_version`)).json()) as { policy_version?: number };
      if (now.policy_version !== version) {
        throw new ArborError(`weight sync: ${url} serves policy version ${String(now.policy_version)} after loading version ${version}`, "weight_sync");
      }
    }),
  );
}
