// Backend registry: maps a config `type` to the adapter factory that speaks to that engine.
import type { BackendConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import type { TokenBackend } from "./backend.js";
import { createLlamacppBackend } from "./llamacpp.js";
import { createOpenAiBackend } from "./openai.js";
import { createSglangBackend } from "./sglang.js";
import { createArborBackend, createVllmBackend } from "./vllm.js";

type BackendFactory = (cfg: { name: string; url: string; model?: string }) => TokenBackend;

const factories: Record<string, BackendFactory> = {
  builtin: (cfg) => createArborBackend(cfg),
  vllm: (cfg) => createVllmBackend(cfg),
  sglang: (cfg) => createSglangBackend(cfg),
  // llama-server serves whatever name a client sends.
  llamacpp: (cfg) => createLlamacppBackend({ name: cfg.name, url: cfg.url }),
  openai: (cfg) => createOpenAiBackend(cfg),
};

/** Names of the backend types that {@link createBackend} knows. */
export const backendTypes: readonly string[] = Object.keys(factories);

/**
 * Create the adapter for one configured backend. `url` overrides the config's (used for engines
 * started in-process, whose port is only known once they listen); `model` is the served model name
 * when the config names none (an in-process engine's `servedModelName`).
 */
export function createBackend(cfg: BackendConfig, overrides: { url?: string; model?: string } = {}): TokenBackend {
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
  const model = cfg.model ?? overrides.model;
  return factory({ name: cfg.name, url, ...(model !== undefined ? { model } : {}) });
}
