// Weight loaders by config kind (`backends[].weightSync.kind`): each makes an external engine serve new policy
// weights through the engine's own API. One registry, one contract suite (engine-weight-loader.contract.ts).
import { resolve } from "node:path";
import type { Clock } from "../../core/clock.js";
import type { WeightSyncConfig } from "../../core/config.js";
import { ArborError } from "../../core/errors.js";
import type { EngineWeightLoader } from "./engine-weights.js";
import { createSglangWeightLoader } from "./sglang.js";
import { createVllmLoraLoader } from "./vllm-lora.js";
import { createVllmReloadLoader } from "./vllm-reload.js";

/** What every loader is made from: the backend it syncs and the run's clock. */
export interface WeightLoaderTarget {
  /** Backend name (errors and logs carry it). */
  name: string;
  /** The backend's url (`…/v1` or the server root). */
  url: string;
  clock: Clock;
  /** The environment the API key is read from (default process.env). */
  env?: NodeJS.ProcessEnv;
}

type LoaderFactory = (cfg: WeightSyncConfig, t: WeightLoaderTarget, apiKey: string | undefined) => EngineWeightLoader;

const common = (cfg: WeightSyncConfig, t: WeightLoaderTarget, apiKey: string | undefined) => ({
  name: t.name,
  url: t.url,
  timeoutMs: cfg.timeoutMs,
  clock: t.clock,
  // Arbor's side of the map is a path on this machine: relative to the working directory, as output.dir is.
  ...(cfg.pathMap ? { pathMap: { from: resolve(cfg.pathMap.from), to: cfg.pathMap.to } } : {}),
  ...(apiKey !== undefined ? { apiKey } : {}),
});

const factories: Record<string, LoaderFactory> = {
  sglang: (cfg, t, key) => createSglangWeightLoader({ ...common(cfg, t, key), ...(cfg.loadFormat !== undefined ? { loadFormat: cfg.loadFormat } : {}) }),
  "vllm-reload": (cfg, t, key) => createVllmReloadLoader({ ...common(cfg, t, key), ...(cfg.sleepLevel !== undefined ? { sleepLevel: cfg.sleepLevel } : {}) }),
  "vllm-lora": (cfg, t, key) => createVllmLoraLoader(common(cfg, t, key)),
};

/** Kinds {@link createWeightLoader} makes from a url (`llamacpp-restart` manages its own process: see cli/external-engines.ts). */
export const urlWeightLoaderKinds: readonly string[] = Object.keys(factories);

/** The loader of a backend's `weightSync`; errors name the backend and the field. */
export function createWeightLoader(cfg: WeightSyncConfig, target: WeightLoaderTarget): EngineWeightLoader {
  const factory = Object.hasOwn(factories, cfg.kind) ? factories[cfg.kind] : undefined;
  if (!factory) throw new ArborError(`backend '${target.name}' weightSync.kind: '${cfg.kind}' is not made from a url (known: ${urlWeightLoaderKinds.join(", ")})`, "config");
  let apiKey: string | undefined;
  if (cfg.apiKeyEnv !== undefined) {
    apiKey = (target.env ?? process.env)[cfg.apiKeyEnv];
    if (!apiKey) throw new ArborError(`backend '${target.name}' weightSync.apiKeyEnv: the environment variable ${cfg.apiKeyEnv} is not set`, "config");
  }
  return factory(cfg, target, apiKey);
}
