// Weight sync to the in-process engines (used by the run's fleet weight sync, fleet-weight-sync.ts): tell every
// engine to serve a new checkpoint over its own HTTP API (POST /v1/load_weights) and confirm it does (GET
// /v1/policy_version), so the loop only tells the rollout about a version every engine serves.
import { ArborError } from "../core/errors.js";
import type { InFlightOnSwitch } from "../backends/weights/engine-weights.js";

export type { InFlightOnSwitch } from "../backends/weights/engine-weights.js";

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
  await Promise.all(
    engines.map(async (e) => {
      const res = await postLoadWeights(e, { model_path: modelPath, policy_version: version, in_flight: e.inFlight ?? inFlight });
      if (res !== "already" && !res.ok) throw new ArborError(`weight sync: engine ${e.name} refused version ${version} (${res.status}: ${(await res.text()).slice(0, 200)})`, "weight_sync");
      const now = await servedVersion(e);
      if (now !== version) {
        throw new ArborError(`weight sync: engine ${e.name} serves policy version ${String(now)} after loading version ${version}`, "weight_sync");
      }
    }),
  );
}

/**
 * POST /v1/load_weights, with one retry after a transport failure. A keep-alive socket the engine closed while
 * this process was busy (a long synchronous trainer step blocks the event loop) fails before the request is
 * read; the retry first asks which version the engine serves, so a request that did arrive is never sent twice.
 */
async function postLoadWeights(e: SyncedEngine, body: { model_path: string; policy_version: number; in_flight: InFlightOnSwitch }): Promise<Response | "already"> {
  const send = (): Promise<Response> => fetch(`${root(e.url)}/v1/load_weights`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const unreachable = (err: unknown): ArborError =>
    new ArborError(`weight sync: engine ${e.name} (${e.url}) unreachable loading version ${body.policy_version}: ${reason(err)}`, "weight_sync");
  try {
    return await send();
  } catch (first) {
    let served: unknown;
    try {
      served = await servedVersion(e);
    } catch {
      throw unreachable(first);
    }
    if (served === body.policy_version) return "already";
    try {
      return await send();
    } catch (second) {
      throw unreachable(second);
    }
  }
}

/** An engine's `GET /v1/policy_version` answer, unchecked. */
async function policyAnswer(e: SyncedEngine, signal?: AbortSignal): Promise<{ policy_version?: unknown; model_path?: unknown }> {
  return (await (await fetch(`${root(e.url)}/v1/policy_version`, signal ? { signal } : {})).json()) as { policy_version?: unknown; model_path?: unknown };
}

async function servedVersion(e: SyncedEngine): Promise<unknown> {
  return (await policyAnswer(e)).policy_version;
}

/**
 * The policy version and weights file an engine serves (`GET /v1/policy_version`, answered within `timeoutMs`);
 * rejects naming the engine.
 */
export async function enginePolicy(e: SyncedEngine, timeoutMs = 5_000): Promise<{ version: number; modelPath: string | null }> {
  let body: Awaited<ReturnType<typeof policyAnswer>>;
  try {
    body = await policyAnswer(e, AbortSignal.timeout(timeoutMs));
  } catch (err) {
    throw new ArborError(`engine ${e.name} (${e.url}): cannot read its policy version: ${reason(err)}`, "weight_sync");
  }
  if (typeof body.policy_version !== "number") throw new ArborError(`engine ${e.name} (${e.url}): /v1/policy_version answered no policy_version`, "weight_sync");
  return { version: body.policy_version, modelPath: typeof body.model_path === "string" ? body.model_path : null };
}

const root = (u: string): string => u.replace(/\/+$/, "");

/** An error's message with its cause's (fetch says only "fetch failed"; the cause says why: refused, reset, timeout). */
function reason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `${err.cause.message}${(err.cause as NodeJS.ErrnoException).code ? ` (${(err.cause as NodeJS.ErrnoException).code})` : ""}` : undefined;
  return cause ? `${err.message}: ${cause}` : err.message;
}
