// Backend registry: maps a config `type` to the adapter factory that speaks to that engine.
import type { BackendConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import type { TokenBackend } from "./backend.js";
import { createLlamacppBackend } from "./llamacpp.js";
import { createOpenAiBackend } from "./openai.js";
import { createSglangBackend } from "./sglang.js";
import { createArborBackend, createVllmBackend } from "./vllm.js";

type BackendFactory = (cfg: { name: string; url: string }) => TokenBackend;

const factories: Record<string, BackendFactory> = {
  builtin: (cfg) => createArborBackend(cfg),
  vllm: (cfg) => createVllmBackend(cfg),
  sglang: (cfg) => createSglangBackend(cfg),
  llamacpp: (cfg) => createLlamacppBackend(cfg),
  openai: (cfg) => createOpenAiBackend(cfg),
};

/** Names of the backend types that {@link createBackend} knows. */
export const backendTypes: readonly string[] = Object.keys(factories);

/**
 * Create the adapter for one configured backend. `url` overrides the config's (used for engines
 * started in-process, whose port is only known once they listen).
 */
export function createBackend(cfg: BackendConfig, overrides: { url?: string } = {}): TokenBackend {
  const type: string = cfg.type;
  const factory = Object.hasOwn(factories, type) ? factories[type] : undefined;
  if (!factory) {
    throw new ArborError(
      `backend '${cfg.name}' type: unknown type '${type}' (known: ${backendTypes.join(", ")})`,
      "config",
    );
  }
  const url = overrides.url ?? cfg.url;
  if (!url) {
    throw new ArborError(`backend '${cfg.name}' url: missing (no url in config and no in-process engine url given)`, "config");
  }
  return factory({ name: cfg.name, url });
}
