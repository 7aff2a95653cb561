// Backend registry: maps a config `type` to the adapter factory that speaks to that engine.
import type { BackendConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { reasoningParserNamed, toolParserNamed } from "./answer-parsers.js";
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

/** What an in-process engine adds to a backend config that leaves it out. */
export interface BackendOverrides {
  /** The engine's url (its port is only known once it listens). */
  url?: string;
  /** The engine's served model name. */
  model?: string;
  /** The engine's tool-call parser name (`engines[].toolParser`). */
  toolParser?: string;
  /** The engine's reasoning parser name (`engines[].reasoningParser`). */
  reasoningParser?: string;
}

/**
 * Create the adapter for one configured backend. `overrides` fill what the config leaves out for an
 * engine started in-process (url, served model name, parsers). The backend carries the tool-call
 * and reasoning parsers its answers are read with: the config's, else the engine's, else Arbor's
 * markup for a `builtin` engine (the tiny policy's format) and none for the others.
 */
export function createBackend(cfg: BackendConfig, overrides: BackendOverrides = {}): TokenBackend {
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
  const toolName = cfg.toolParser ?? overrides.toolParser ?? (type === "builtin" ? "arbor" : undefined);
  const reasoningName = cfg.reasoningParser ?? overrides.reasoningParser;
  // Resolved before the adapter is made: a misspelt name fails the config, not the first tool call.
  const where = `backend '${cfg.name}'`;
  const toolParser = toolName !== undefined ? toolParserNamed(toolName, `${where} toolParser`) : undefined;
  const reasoningParser = reasoningName !== undefined ? reasoningParserNamed(reasoningName, `${where} reasoningParser`) : undefined;
  const backend = factory({ name: cfg.name, url, ...(model !== undefined ? { model } : {}) });
  if (toolParser === undefined && reasoningParser === undefined) return backend;
  return { ...backend, ...(toolParser ? { toolParser } : {}), ...(reasoningParser ? { reasoningParser } : {}) };
}
