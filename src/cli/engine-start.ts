// What `arbor run` and `arbor serve engine` share to start an engine: the GGUF it serves (the config's
// `model.path`, else the tiny or made-here policy created once from `model.init`) and the engine server's
// options from an engine's config; which engine of a run serves the group trees its other engines share.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { basename, resolve } from "node:path";
import type { Clock } from "../core/clock.js";
import type { EngineConfig, ModelConfig } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { COST_PROFILES } from "../engine/costmodel/profile.js";
import { RedisStatePool } from "../engine/kv/redis-state-pool.js";
import type { EngineServerOptions } from "../engine/server.js";
import { cutDraftModel } from "../model/draft-cut.js";
import { makeModel } from "../model/made/made-models.js";
import { ensurePolicy } from "../model/policy.js";

/** The GGUF engines serve: `model.path`, else the policy made (once, cached in .arbor/models) from `model.init`. */
export function policyPath(model: ModelConfig, log: (line: string) => void): string {
  if (model.path !== undefined) return model.path;
  const dir = resolve(".arbor/models");
  const vocab = model.vocab;
  const policy = vocab === "arbor" ? ensurePolicy(dir, model.init) : makeModel(vocab, dir, model.init);
  log(`policy   ${policy.path} (${policy.created ? "created" : "cached"}, ${vocab} vocabulary, seed ${model.init.seed})`);
  return policy.path;
}

/**
 * Refuse a `model.path` an engine of this process cannot load before anything starts, naming the field: the loader's
 * own error (ENOENT, EISDIR) named neither the field nor what to give.
 */
export function checkModelFile(path: string): void {
  if (!existsSync(path)) throw new ArborError(`model.path: ${resolve(path)} does not exist (a GGUF file)`, "config");
  if (!statSync(path).isFile()) throw new ArborError(`model.path: ${resolve(path)} is a folder, not a GGUF file (a Hugging Face checkpoint folder converts with \`arbor hf convert\`)`, "config");
}

/**
 * Refuse a `costProfile` no cost model has before an engine starts, naming the field (`engines[i].costProfile`) and
 * the profiles there are; the engine's own error named neither. `index` is the engine's place in its file.
 */
export function checkCostProfile(e: EngineConfig, index: number): void {
  if (e.costProfile === undefined || Object.hasOwn(COST_PROFILES, e.costProfile)) return;
  throw new ArborError(`engines[${index}].costProfile: no cost profile '${e.costProfile}' (known: ${Object.keys(COST_PROFILES).join(", ")})`, "config");
}

/**
 * Engine `e` with a draft model from policy version 0 on: an engine with `speculative.method: draft-model` and
 * no `draftModel` of its own gets the policy at `modelPath` cut to its first `layers` blocks (model/draft-cut.ts;
 * `train.draftModel.layers`, else 1), made once into `.arbor/models/drafts/` and again when the policy file is
 * newer. Until the first alignment writes `draft-v1.gguf` beside `policy-v1.gguf`, that cut is what it serves
 * (and without `train.draftModel`, for the whole run). Other engines are returned unchanged.
 */
export function withV0Draft(e: EngineConfig, modelPath: string, layers: number, log: (line: string) => void, dir = resolve(".arbor/models/drafts")): EngineConfig {
  if (e.speculative?.method !== "draft-model" || e.speculative.draftModel !== undefined) return e;
  const key = createHash("sha256").update(resolve(modelPath)).digest("hex").slice(0, 8);
  const path = resolve(dir, `${basename(modelPath, ".gguf")}-${key}-draft-${layers}l.gguf`);
  if (!existsSync(path) || statSync(path).mtimeMs < statSync(modelPath).mtimeMs) {
    mkdirSync(dir, { recursive: true });
    const cut = cutDraftModel(modelPath, path, layers);
    log(`draft    ${path} (engine ${e.name}: the policy cut to ${cut.layers} block${cut.layers === 1 ? "" : "s"}, the draft until the first alignment)`);
  }
  return { ...e, speculative: { ...e.speculative, draftModel: path } };
}

/**
 * The engine whose group trees (`/v1/specdec`) a run's other suffix-speculating engines share, so a GRPO
 * group's siblings placed on different engines draft each other: the first engine with
 * `speculative.method: suffix` and no `draftService` of its own, when two or more such engines run. Undefined
 * otherwise (one engine shares nothing; engines naming a service keep it).
 */
export function draftServiceHost(engines: readonly EngineConfig[]): number | undefined {
  const sharing = engines.flatMap((e, i) => (e.speculative?.method === "suffix" && e.speculative.draftService === undefined ? [i] : []));
  return sharing.length >= 2 ? sharing[0] : undefined;
}

/** Engine `e` pointed at the shared draft service at `url`, when it speculates with suffix trees and names no service. */
export function withDraftService(e: EngineConfig, url: string): EngineConfig {
  if (e.speculative?.method !== "suffix" || e.speculative.draftService !== undefined) return e;
  return { ...e, speculative: { ...e.speculative, draftService: { url } } };
}

/**
 * The engine server's options for engine `e` of a config, at policy version 0. With `kvPool`, the
 * options carry a client of the Redis pool (connected on first use, closed with the engine).
 */
export function engineServerOptions(e: EngineConfig, o: { modelPath: string; host: string; seed: number; clock: Clock }): EngineServerOptions {
  return {
    name: e.name,
    modelPath: o.modelPath,
    policyVersion: 0,
    sequences: e.sequences,
    contextSize: e.contextSize,
    maxWaiting: e.maxWaiting,
    host: o.host,
    port: e.port,
    seed: o.seed,
    inFlightOnWeightSwitch: e.inFlightOnWeightSwitch,
    executorKind: e.executor,
    costProfile: e.costProfile,
    ...(e.sampler !== "arbor" ? { sampler: e.sampler } : {}),
    servedModelName: e.servedModelName,
    gpu: e.gpu,
    ...(e.toolParser !== undefined ? { toolParser: e.toolParser } : {}),
    ...(e.reasoningParser !== undefined && e.reasoningParser !== "none" ? { reasoningParser: e.reasoningParser } : {}),
    role: e.role,
    ...(e.speculative ? { speculative: e.speculative } : {}),
    ...(e.kvPool ? { kvPool: new RedisStatePool({ url: e.kvPool.url, capacityBytes: e.kvPool.capacityBytes, name: e.kvPool.name }) } : {}),
    clock: o.clock,
  };
}
