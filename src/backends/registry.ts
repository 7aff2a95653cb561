// Backend registry: maps a config `type` to the adapter factory that speaks to that engine.
import type { BackendConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { reasoningParserNamed, toolParserNamed } from "./answer-parsers.js";
import type { TokenBackend } from "./backend.js";
import { createDisaggBackend } from "./disagg-backend.js";
import { loadServedTokenizer, localTokenizer } from "./local-tokenizer.js";
import { withLocalTokenizer } from "./local-tokenizer-backend.js";
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
export const backendTypes: readonly string[] = [...Object.keys(factories), "disagg"];

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
  if (type === "disagg") return withParsers(cfg, createDisaggFromConfig(cfg, overrides), overrides);
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
  // Parsers are resolved before the adapter is made: a misspelt name fails the config, not the first tool call.
  parsersOf(cfg, overrides);
  const backend = factory({ name: cfg.name, url, ...(model !== undefined ? { model } : {}) });
  return withParsers(cfg, withConfiguredTokenizer(cfg, backend), overrides);
}

/** The backend with its tokenizer run in process when the config names the model's GGUF (`backends[].tokenizer`). */
function withConfiguredTokenizer(cfg: BackendConfig, backend: TokenBackend): TokenBackend {
  if (cfg.tokenizer === undefined) return backend;
  // The schema checks the type; a config built in code gets the same words.
  if (cfg.type !== "vllm" && cfg.type !== "builtin") throw new ArborError(`backend '${cfg.name}' tokenizer: only used with type: vllm or builtin`, "config");
  return withLocalTokenizer(backend, localTokenizer(loadServedTokenizer(cfg.tokenizer, `backend '${cfg.name}' tokenizer`)));
}

/** The configured (else the in-process engine's) parsers; Arbor's markup by default for Arbor engines. */
function parsersOf(cfg: BackendConfig, overrides: BackendOverrides): Pick<TokenBackend, "toolParser" | "reasoningParser"> {
  const arborEngines = cfg.type === "builtin" || cfg.type === "disagg";
  const toolName = cfg.toolParser ?? overrides.toolParser ?? (arborEngines ? "arbor" : undefined);
  const reasoningName = cfg.reasoningParser ?? overrides.reasoningParser;
  const where = `backend '${cfg.name}'`;
  return {
    ...(toolName !== undefined ? { toolParser: toolParserNamed(toolName, `${where} toolParser`) } : {}),
    ...(reasoningName !== undefined ? { reasoningParser: reasoningParserNamed(reasoningName, `${where} reasoningParser`) } : {}),
  };
}

function withParsers(cfg: BackendConfig, backend: TokenBackend, overrides: BackendOverrides): TokenBackend {
  const parsers = parsersOf(cfg, overrides);
  if (parsers.toolParser === undefined && parsers.reasoningParser === undefined) return backend;
  // Spread keeps the disagg backend's own methods (stats, lastPlacement) too.
  return { ...backend, ...parsers };
}

/**
 * A `type: disagg` backend: one Arbor engine adapter per URL of `prefill`, `decode` and `mixed`, named
 * `<backend>.<role><i>` in errors, all sending the configured served model name.
 */
function createDisaggFromConfig(cfg: BackendConfig, overrides: BackendOverrides): TokenBackend {
  // The schema checks these; a config built in code gets the same words.
  for (const role of ["prefill", "decode"] as const) {
    if ((cfg[role] ?? []).length === 0) throw new ArborError(`backend '${cfg.name}' ${role}: type: disagg needs at least one engine with role ${role} (its base URL)`, "config");
  }
  const model = cfg.model ?? overrides.model;
  const engines = (role: "prefill" | "decode" | "mixed"): TokenBackend[] =>
    (cfg[role] ?? []).map((url, i) => createArborBackend({ name: `${cfg.name}.${role}${i}`, url, ...(model !== undefined ? { model } : {}) }));
  return createDisaggBackend({
    name: cfg.name,
    prefill: engines("prefill"),
    decode: engines("decode"),
    ...(cfg.mixed !== undefined ? { mixed: engines("mixed") } : {}),
    ...(cfg.cost !== undefined ? { cost: cfg.cost } : {}),
  });
}
