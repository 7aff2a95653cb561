// The external engines of a run that trains (backends with `weightSync`): each backend wrapped in a
// SyncedBackend over its weight loader, and for `llamacpp-restart` the llama-server process Arbor starts on the
// run's GGUF and restarts on every new version. The run routes to `backend`s and syncs weights through them.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TokenBackend } from "../backends/backend.js";
import { findLlamaServer } from "../backends/llama-server-binary.js";
import { createBackend, type BackendOverrides } from "../backends/registry.js";
import type { EngineWeightLoader } from "../backends/weights/engine-weights.js";
import { createLlamacppRestartLoader } from "../backends/weights/llamacpp-restart.js";
import { ManagedLlamaServer } from "../backends/weights/managed-llama-server.js";
import { createWeightLoader } from "../backends/weights/registry.js";
import { SyncedBackend } from "../backends/weights/synced-backend.js";
import type { Clock } from "../core/clock.js";
import type { BackendConfig, WeightSyncConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { readGgufMetadata } from "../model/gguf.js";
import { tokenizerSpecFromGguf } from "../model/gguf-tokenizer.js";
import { ARBOR_CHAT_TEMPLATE, isArborVocabulary } from "../model/hf/arbor-jinja-template.js";

/** Options of {@link startExternalEngine}. */
export interface ExternalEngineOptions {
  cfg: BackendConfig & { weightSync: WeightSyncConfig };
  /** The GGUF the run starts from (a managed llama-server serves it first). */
  modelPath: string;
  /** Where managed engines keep their slot files. */
  workDir: string;
  clock: Clock;
  /** Wraps each adapter made (the run's reply tap); identity by default. */
  wrap?: (b: TokenBackend) => TokenBackend;
  log?: (line: string) => void;
  /** Told when the engine fails to load a version and leaves the rotation for good. */
  onRetired?: (name: string, reason: string) => void;
}

/** Start (for a managed llama-server) or connect to one external engine and wrap it for weight switches. */
export async function startExternalEngine(o: ExternalEngineOptions): Promise<SyncedBackend> {
  const { cfg, clock } = o;
  const ws = cfg.weightSync;
  let loader: EngineWeightLoader;
  let overrides: BackendOverrides = {};
  if (ws.kind === "llamacpp-restart") {
    const server = await startManagedLlamaServer(cfg.name, ws, o.modelPath, join(o.workDir, cfg.name), clock);
    o.log?.(`engine   ${server.url} (${cfg.name}: llama-server managed by Arbor, restarted on each policy version)`);
    overrides = { url: `${server.url}/v1` };
    loader = createLlamacppRestartLoader({ name: cfg.name, server, slots: ws.slots, timeoutMs: ws.timeoutMs, version: 0, clock });
  } else {
    loader = createWeightLoader(ws, { name: cfg.name, url: cfg.url as string, clock });
  }
  const wrap = o.wrap ?? ((b: TokenBackend) => b);
  return new SyncedBackend({
    makeBackend: (model) => wrap(createBackend(model !== undefined ? { ...cfg, model } : cfg, overrides)),
    loader,
    inFlight: ws.inFlightOnWeightSwitch,
    drainTimeoutMs: ws.drainTimeoutMs,
    clock,
    ...(o.log ? { log: o.log } : {}),
    ...(o.onRetired ? { onRetired: (reason: string) => o.onRetired?.(cfg.name, reason) } : {}),
  });
}

async function startManagedLlamaServer(name: string, ws: WeightSyncConfig, modelPath: string, dir: string, clock: Clock): Promise<ManagedLlamaServer> {
  let binary = ws.binary;
  if (binary === undefined) {
    const found = findLlamaServer();
    if ("missing" in found) throw new ArborError(`backend '${name}' weightSync.binary: no llama-server found (${found.missing})`, "config");
    binary = found.path;
  }
  mkdirSync(dir, { recursive: true });
  return ManagedLlamaServer.start({ name, binary, modelPath, slotSaveDir: dir, port: ws.port, extraArgs: [...ws.args, ...templateArgs(modelPath, dir, ws.args)], clock });
}

/**
 * llama-server renders chats with the GGUF's `tokenizer.chat_template`, and without one falls back to ChatML,
 * whose markers Arbor's vocabulary spells out letter by letter: the model would see prompts unlike any it was
 * trained on. Arbor's own policies carry no template (Arbor's engine renders them itself), so the server gets
 * Arbor's template as Jinja (the one `arbor hf export` writes), unless the configured args choose a template.
 */
function templateArgs(modelPath: string, dir: string, args: readonly string[]): string[] {
  if (args.some((a) => a.startsWith("--chat-template"))) return [];
  const meta = readGgufMetadata(modelPath).metadata;
  if (meta.has("tokenizer.chat_template")) return [];
  const tok = tokenizerSpecFromGguf(meta, modelPath);
  if (!isArborVocabulary(tok.tokens, tok.types)) return [];
  const file = join(dir, "arbor-chat-template.jinja");
  writeFileSync(file, ARBOR_CHAT_TEMPLATE);
  return [...(args.includes("--jinja") ? [] : ["--jinja"]), "--chat-template-file", file];
}
