// The tiny llama policy as a differentiable tfjs model: the same tensors, names and maths as the GGUF
// llama.cpp runs (src/model/weights.ts): token embedding, per block RMSNorm → grouped-query attention
// with RoPE (NORM mode) → residual, RMSNorm → SwiGLU → residual, then RMSNorm and the untied output head.
// Attention takes an explicit additive mask, so one forward pass serves causal sequences and prefix trees.
import * as tf from "@tensorflow/tfjs";
import { ArborError } from "../core/errors.js";
import { headDim, type TinyLlamaConfig } from "../model/config.js";
import { checkTensors, expectedShapes, type Tensor } from "../model/weights.js";
import type { SegmentAttention } from "./attention-mask.js";
import { ropeTables } from "./rope.js";
import { attention, treeAttention } from "./attention-core.js";
import { linear as fastLinear, swapPairs } from "./fast-matmul.js";
import { gatherRows } from "./tf-ops.js";
import { entropyOfLogSoftmax } from "./token-entropy.js";

let instances = 0;

/**
 * How tokens attend: one dense n×n additive mask (causal sequences, small trees), or a tree's chains,
 * each attending its own keys (large trees: no n² tensor), all in one op (`treeAttention`).
 */
export type AttentionPlan = { kind: "dense"; mask: Float32Array } | { kind: "segments"; segments: SegmentAttention[] };

/** Policy weights as tfjs variables, keyed by their GGUF names. Call `tfWasm()` before constructing one. */
export class TinyLlama {
  readonly params: Map<string, tf.Variable>;
  /** Prefix of this instance's tfjs variable names (tfjs requires globally unique names). */
  readonly scope: string;

  /** Wrap `tensors` (checked against `config`) as trainable variables. */
  constructor(
    readonly config: TinyLlamaConfig,
    tensors: readonly Tensor[],
  ) {
    checkTensors(config, tensors);
    this.scope = `arbor-policy-${instances++}`;
    const byName = new Map(tensors.map((t) => [t.name, t]));
    this.params = new Map(
      expectedShapes(config).map(({ name, shape }) => {
        const t = byName.get(name) as Tensor;
        return [name, tf.variable(tf.tensor(t.data, shape, "float32"), true, `${this.scope}/${name}`)];
      }),
    );
  }

  /** A parameter by GGUF name. */
  param(name: string): tf.Variable {
    const v = this.params.get(name);
    if (!v) throw new ArborError(`trainer: no parameter '${name}'`, "trainer");
    return v;
  }

  /** GGUF name of a tfjs variable name of this instance. */
  nameOf(variableName: string): string {
    return variableName.startsWith(`${this.scope}/`) ? variableName.slice(this.scope.length + 1) : variableName;
  }

  /** Copy the current weights out, in GGUF order. */
  toTensors(): Tensor[] {
    return [...this.params].map(([name, v]) => ({ name, shape: [...v.shape], data: Float32Array.from(v.dataSync() as Float32Array) }));
  }

  /** Overwrite every weight with `tensors` (same config). */
  assign(tensors: readonly Tensor[]): void {
    checkTensors(this.config, tensors);
    for (const t of tensors) {
      const v = this.param(t.name);
      tf.tidy(() => v.assign(tf.tensor(t.data, v.shape, "float32")));
    }
  }

  /** Free the variables. */
  dispose(): void {
    for (const v of this.params.values()) v.dispose();
  }

  /**
   * Final hidden states [n, nEmbd] (after output_norm) of `tokens` at position ids `positions`, attending
   * as `plan` says (see attention-mask.ts). Builds tensors: call inside tf.tidy or a gradient function.
   */
  hidden(tokens: ArrayLike<number>, positions: ArrayLike<number>, plan: AttentionPlan): tf.Tensor2D {
    const cfg = this.config;
    const n = tokens.length;
    if (positions.length !== n) throw new ArborError(`trainer: ${n} tokens need ${n} positions (got ${positions.length})`, "trainer");
    if (plan.kind === "dense" && plan.mask.length !== n * n) throw new ArborError(`trainer: ${n} tokens need an ${n}×${n} mask (got ${plan.mask.length} entries)`, "trainer");
    if (plan.kind === "segments" && (plan.segments[0]?.start ?? 0) !== 0) throw new ArborError("trainer: segments must cover the nodes in order from 0", "trainer");
    for (let i = 0; i < n; i++) {
      const t = tokens[i] as number;
      if (!Number.isInteger(t) || t < 0 || t >= cfg.nVocab) throw new ArborError(`trainer: token ${t} at ${i} is outside the vocabulary (0..${cfg.nVocab - 1})`, "trainer");
    }
    const hd = headDim(cfg);
    const rope = ropeTables(positions, hd, cfg.ropeFreqBase);
    const cos = tf.tensor4d(rope.cos2, [n, 1, hd / 2, 2]);
    const sin = tf.tensor4d(rope.sin2, [n, 1, hd / 2, 2]);
    const applyRope = (x: tf.Tensor2D, heads: number): tf.Tensor3D => {
      const x4 = tf.reshape(x, [n, heads, hd / 2, 2]);
      return tf.reshape(tf.add(tf.mul(x4, cos), tf.mul(swapPairs(x4), sin)), [n, heads, hd]);
    };
    const linear = (x: tf.Tensor2D, name: string): tf.Tensor2D => fastLinear(x, this.param(name) as tf.Tensor2D);
    const scale = 1 / Math.sqrt(hd);

    let x = gatherRows(this.param("token_embd.weight"), tf.tensor1d(Int32Array.from(tokens), "int32")) as tf.Tensor2D;
    for (let l = 0; l < cfg.nLayer; l++) {
      const p = `blk.${l}.`;
      const h = rmsNorm(x, this.param(`${p}attn_norm.weight`), cfg.rmsEps);
      const q = applyRope(linear(h, `${p}attn_q.weight`), cfg.nHead);
      const k = applyRope(linear(h, `${p}attn_k.weight`), cfg.nHeadKv);
      const v = tf.reshape(linear(h, `${p}attn_v.weight`), [n, cfg.nHeadKv, hd]) as tf.Tensor3D;
      const attn = plan.kind === "dense" ? attention(q, k, v, plan.mask, scale) : treeAttention(q, k, v, plan.segments, scale);
      x = tf.add(x, linear(attn, `${p}attn_output.weight`)) as tf.Tensor2D;
      const h2 = rmsNorm(x, this.param(`${p}ffn_norm.weight`), cfg.rmsEps);
      const gate = linear(h2, `${p}ffn_gate.weight`);
      const act = tf.mul(tf.mul(gate, tf.sigmoid(gate)), linear(h2, `${p}ffn_up.weight`)) as tf.Tensor2D;
      x = tf.add(x, linear(act, `${p}ffn_down.weight`)) as tf.Tensor2D;
    }
    return rmsNorm(x, this.param("output_norm.weight"), cfg.rmsEps);
  }

  /** Next-token logits [rows, nVocab] at the given rows of `hidden`. */
  logits(hidden: tf.Tensor2D, rows: ArrayLike<number>): tf.Tensor2D {
    const picked = gatherRows(hidden, tf.tensor1d(Int32Array.from(rows), "int32"));
    return fastLinear(picked, this.param("output.weight") as tf.Tensor2D);
  }

  /** log π(targets[i] | row rows[i]) as a [rows] tensor. */
  logprobs(hidden: tf.Tensor2D, rows: ArrayLike<number>, targets: ArrayLike<number>): tf.Tensor1D {
    return this.termOutputs(hidden, rows, targets, false).logprob;
  }

  /**
   * log π(targets[i] | row rows[i]) and, with `withEntropy`, the entropy of π at each row (token-entropy.ts),
   * both from one computation of the rows' logits.
   */
  termOutputs(hidden: tf.Tensor2D, rows: ArrayLike<number>, targets: ArrayLike<number>, withEntropy: boolean): { logprob: tf.Tensor1D; entropy?: tf.Tensor1D } {
    if (rows.length !== targets.length) throw new ArborError(`trainer: ${rows.length} rows but ${targets.length} targets`, "trainer");
    if (rows.length === 0) return withEntropy ? { logprob: tf.zeros([0]), entropy: tf.zeros([0]) } : { logprob: tf.zeros([0]) };
    for (let i = 0; i < targets.length; i++) {
      const t = targets[i] as number;
      if (!Number.isInteger(t) || t < 0 || t >= this.config.nVocab) {
        throw new ArborError(`trainer: target token ${t} is outside the vocabulary (0..${this.config.nVocab - 1})`, "trainer");
      }
    }
    const logits = this.logits(hidden, rows);
    const lsm = tf.logSoftmax(logits, -1);
    const logprob = tf.sum(tf.mul(lsm, tf.oneHot(tf.tensor1d(Int32Array.from(targets), "int32"), this.config.nVocab)), -1) as tf.Tensor1D;
    return withEntropy ? { logprob, entropy: entropyOfLogSoftmax(lsm as tf.Tensor2D) } : { logprob };
  }
}

/** x · rsqrt(mean(x²) + eps) · w over the last axis (llama.cpp's RMS norm). */
function rmsNorm(x: tf.Tensor2D, w: tf.Tensor, eps: number): tf.Tensor2D {
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps))), w);
}
