// Shape of Arbor's tiny llama-architecture policy (RMSNorm, RoPE, SwiGLU, grouped-query attention).
// One validated config is shared by the GGUF writer, the weight initialiser and the trainer.

import { ArborError } from "../core/errors.js";
import { Vocab } from "./vocab.js";

/** Hyper-parameters of the tiny llama policy. */
export interface TinyLlamaConfig {
  nVocab: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  nFf: number;
  contextLength: number;
  rmsEps: number;
  ropeFreqBase: number;
}

const DEFAULTS: Omit<TinyLlamaConfig, "nVocab"> = {
  nEmbd: 64,
  nLayer: 2,
  nHead: 4,
  nHeadKv: 4,
  nFf: 192,
  contextLength: 2048,
  rmsEps: 1e-5,
  ropeFreqBase: 10000,
};

/**
 * Build and validate a config; unspecified fields take the tiny defaults and `nVocab` the size of
 * Arbor's vocabulary. Throws an ArborError naming the field and the reason on bad input.
 */
export function tinyConfig(overrides: Partial<TinyLlamaConfig> = {}): TinyLlamaConfig {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const cfg: TinyLlamaConfig = { nVocab: new Vocab().size, ...DEFAULTS, ...defined };
  validateConfig(cfg);
  return cfg;
}

/** Check a config's invariants (the ones llama.cpp and RoPE rely on). */
export function validateConfig(cfg: TinyLlamaConfig): void {
  const fail = (field: string, reason: string): never => {
    throw new ArborError(`model config: ${field} ${reason}`, "config");
  };
  for (const field of ["nVocab", "nEmbd", "nLayer", "nHead", "nHeadKv", "nFf", "contextLength"] as const) {
    const v = cfg[field];
    if (!Number.isInteger(v) || v <= 0 || v > 0xffffffff) fail(field, `must be a positive integer (got ${v})`);
  }
  for (const field of ["rmsEps", "ropeFreqBase"] as const) {
    const v = cfg[field];
    if (!Number.isFinite(v) || v <= 0) fail(field, `must be a positive number (got ${v})`);
  }
  if (cfg.nEmbd % cfg.nHead !== 0) fail("nEmbd", `(${cfg.nEmbd}) must be divisible by nHead (${cfg.nHead})`);
  if (cfg.nHead % cfg.nHeadKv !== 0) fail("nHead", `(${cfg.nHead}) must be divisible by nHeadKv (${cfg.nHeadKv})`);
  const headDim = cfg.nEmbd / cfg.nHead;
  if (headDim % 2 !== 0) fail("nEmbd", `/ nHead = ${headDim} must be even (RoPE rotates pairs)`);
}

/** Size of one attention head. */
export function headDim(cfg: TinyLlamaConfig): number {
  return cfg.nEmbd / cfg.nHead;
}
