// The policy-gradient losses (docs/references.md §C2, §C3) as one declarative spec plus a plain-number reference
// implementation. The trainer (src/trainer, or an external one) mirrors `referenceLoss` with tensors; tests
// pin both to hand-computed values. Everything is over *terms*: one per model token that has a loss, the
// same in a flat layout and in a prefix tree (src/batch/tree/packed-tree.ts), so one formula serves both.
//
// Formula, per term t (all sums over terms; sg = stop-gradient):
//   d_t      = logprob_t − oldLogprob_t                       (oldLogprob = the engine's behaviour logprob)
//   log ρ_t  = d_t                                  if ratio = "token"
//            = mean_{s ∈ unit(t)} d_s               if ratio = "sequence" | "chunk" (geometric-mean ratio; the
//                                                   gradient flows through every term of the unit, as GSPO)
//   ρ̄_t      = clip(ρ_t, 1 − epsLow, 1 + epsHigh)
//   f_t      = min(ρ_t·A_t, ρ̄_t·A_t)               if objective = "clip"  (PPO/GRPO/DAPO/GSPO/chunked MDP)
//            = max(min(ρ_t·A_t, ρ̄_t·A_t), c·A_t)   if objective = "clip", A_t < 0 and clipRatioC = c is set
//                                                   (dual-clip PPO, verl's `clip_ratio_c`: a negative-advantage
//                                                   term's loss −f is bounded by −c·A, so a token whose ratio
//                                                   has run far above 1 — stale, off-policy samples in async
//                                                   mode and partial rollouts — cannot dominate the step; the
//                                                   bounded term has zero gradient)
//            = sg(ρ̄_t)·A_t·logprob_t                if objective = "cispo" (clipped IS weight, REINFORCE term)
//   m_u      = 1[exp(mean_{s∈u}(trainerOld_s − oldLogprob_s)) ≤ H]   if mismatchThreshold H is set, else 1
//              (trainerOld = the trainer's logprob under the weights before the update; absent → sg(logprob))
//   loss     = −Σ_t weight_t · m_{unit(t)} · f_t
// `weight` carries the normaliser (see `normaliser`), so the loss needs no other batch-level reduction.
// In tfjs: d = sub(lp, old); sequence/chunk ρ via a per-unit mean of d (a segment sum, or a [units × terms]
// averaging matmul where the back-end lacks one), gathered back by unit;
// clip via clipByValue; min via minimum; sg by computing the clipped weight from values outside the gradient
// (a constant tensor of ρ̄); then the sum of mul(weight, ·). `referenceLossGradient` gives d loss / d logprob.
import { ArborError } from "../../core/errors.js";

/** How per-token loss weights are normalised across a batch. */
export type Normaliser =
  /** 1 / Σ_samples |o| : every model token weighs the same (DAPO, CISPO, token-level). */
  | "token-mean"
  /** 1 / (|o_i| · N): mean over each sample's tokens, then over the N samples (GRPO, GSPO). */
  | "sample-mean"
  /** 1 / (|u| · U): mean over each ratio unit's tokens, then over the U units (chunked MDP: chunks). */
  | "unit-mean"
  /** 1 / (N · C) with a fixed C (`normaliserConstant`, e.g. the generation budget): Dr.GRPO. */
  | "constant";

/** A loss, fully described: what the trainer must compute. */
export interface LossSpec {
  ratio: "token" | "sequence" | "chunk";
  objective: "clip" | "cispo";
  epsLow: number;
  epsHigh: number;
  normaliser: Normaliser;
  /** C of the "constant" normaliser. */
  normaliserConstant?: number;
  /** H of the chunk mismatch mask; absent = no mask. */
  mismatchThreshold?: number;
  /**
   * c of dual-clip PPO for objective "clip" (verl's `clip_ratio_c`, 3 in its defaults and in Arbor's token and
   * chunk clip estimators): a negative-advantage term contributes at most −c·A to the loss. Must be > 1;
   * absent = no dual clip.
   */
  clipRatioC?: number;
}

/** Per-term arrays (all the same length). */
export interface LossInput {
  /** log π_θ(target) under the weights being trained. */
  logprob: ArrayLike<number>;
  /** The behaviour policy's logprob (what the engine reported). */
  oldLogprob: ArrayLike<number>;
  advantage: ArrayLike<number>;
  weight: ArrayLike<number>;
  /** Ratio unit of each term (sample for "sequence", sample×chunk for "chunk"; ignored for "token"). */
  unit: ArrayLike<number>;
  /** The trainer's logprob before the update, for the mismatch mask; absent = `logprob`. */
  trainerOldLogprob?: ArrayLike<number>;
}

/** The loss and what it did. */
export interface LossResult {
  loss: number;
  /** Fraction of terms (by count) whose ratio was clipped on the side that stops the gradient. */
  clipFraction: number;
  /** Fraction of terms (by count) bounded by the dual clip (verl's `pg_clipfrac_lower`); 0 without `clipRatioC`. */
  dualClipFraction: number;
  /**
   * KL(μ‖π) between the sampling policy μ (`oldLogprob`) and the trainer's π, per term, by the k3 estimator
   * (e^r − 1 − r with r = log π − log μ: unbiased on μ's samples, never negative); mean over all terms, 0 for none.
   */
  kl: number;
  /** Units dropped by the mismatch mask. */
  maskedUnits: number;
  units: number;
}

function fail(message: string): never {
  throw new ArborError(`loss: ${message}`, "batch");
}

/** Check a spec's numbers; throws an {@link ArborError} naming the field. */
export function validateLossSpec(spec: LossSpec): LossSpec {
  if (!(spec.epsLow >= 0) || !Number.isFinite(spec.epsLow)) fail(`epsLow must be a finite number >= 0, got ${spec.epsLow}`);
  if (!(spec.epsHigh >= 0) || !Number.isFinite(spec.epsHigh)) fail(`epsHigh must be a finite number >= 0, got ${spec.epsHigh}`);
  if (spec.normaliser === "constant" && !((spec.normaliserConstant ?? 0) > 0)) fail(`normaliserConstant must be > 0 for the constant normaliser`);
  if (spec.mismatchThreshold !== undefined && !(spec.mismatchThreshold > 0)) fail(`mismatchThreshold must be > 0, got ${spec.mismatchThreshold}`);
  if (spec.clipRatioC !== undefined) {
    // verl asserts the same: with c ≤ 1 the bound would cut into the ordinary clipped region.
    if (!(spec.clipRatioC > 1) || !Number.isFinite(spec.clipRatioC)) fail(`clipRatioC must be a finite number > 1, got ${spec.clipRatioC}`);
    if (spec.objective !== "clip") fail(`clipRatioC applies to objective 'clip' only, not '${spec.objective}'`);
  }
  return spec;
}

/**
 * Per ratio unit (a token, or a sequence/chunk id): Σ(log π − log π_old), Σ(log π_trainer-old − log μ) for the
 * mismatch mask, and the term count — what both the loss and its gradient are built from.
 */
function unitSums(spec: LossSpec, input: LossInput) {
  const trainerOld = input.trainerOldLogprob ?? input.logprob;
  const unitOf = (t: number): number => (spec.ratio === "token" ? t : (input.unit[t] as number));
  const sumD = new Map<number, number>();
  const sumMismatch = new Map<number, number>();
  const count = new Map<number, number>();
  for (let t = 0; t < input.logprob.length; t++) {
    const u = unitOf(t);
    sumD.set(u, (sumD.get(u) ?? 0) + (input.logprob[t] as number) - (input.oldLogprob[t] as number));
    sumMismatch.set(u, (sumMismatch.get(u) ?? 0) + (trainerOld[t] as number) - (input.oldLogprob[t] as number));
    count.set(u, (count.get(u) ?? 0) + 1);
  }
  return { unitOf, sumD, sumMismatch, count };
}

/** The scalar loss of `spec` on `input` in float64 (see the formula at the top of this file). */
export function referenceLoss(spec: LossSpec, input: LossInput): LossResult {
  const n = input.logprob.length;
  for (const f of ["oldLogprob", "advantage", "weight", "unit"] as const) {
    if (input[f].length !== n) fail(`${f} has ${input[f].length} entries for ${n} terms`);
  }
  const trainerOld = input.trainerOldLogprob ?? input.logprob;
  if (trainerOld.length !== n) fail(`trainerOldLogprob has ${trainerOld.length} entries for ${n} terms`);
  const { unitOf, sumD, sumMismatch, count } = unitSums(spec, input);
  const masked = new Set<number>();
  if (spec.mismatchThreshold !== undefined) {
    for (const [u, s] of sumMismatch) if (Math.exp(s / (count.get(u) as number)) > spec.mismatchThreshold) masked.add(u);
  }
  let loss = 0;
  let clipped = 0;
  let dual = 0;
  let kl = 0;
  for (let t = 0; t < n; t++) {
    const r = (input.logprob[t] as number) - (input.oldLogprob[t] as number);
    kl += Math.expm1(r) - r;
    const u = unitOf(t);
    if (masked.has(u)) continue;
    const rho = Math.exp((sumD.get(u) as number) / (count.get(u) as number));
    const clippedRho = Math.min(Math.max(rho, 1 - spec.epsLow), 1 + spec.epsHigh);
    const a = input.advantage[t] as number;
    let f: number;
    if (spec.objective === "clip") {
      f = Math.min(rho * a, clippedRho * a);
      if (clippedRho * a < rho * a) clipped++;
      if (spec.clipRatioC !== undefined && a < 0 && spec.clipRatioC * a > f) {
        f = spec.clipRatioC * a;
        dual++;
      }
    } else {
      f = clippedRho * a * (input.logprob[t] as number);
      if (clippedRho !== rho) clipped++;
    }
    loss -= (input.weight[t] as number) * f;
  }
  return { loss, clipFraction: n === 0 ? 0 : clipped / n, dualClipFraction: n === 0 ? 0 : dual / n, kl: n === 0 ? 0 : kl / n, maskedUnits: masked.size, units: count.size };
}

/**
 * d loss / d logprob for every term, in float64: the reference the trainer's autodiff must match. The mismatch
 * mask and CISPO's clipped weight are constants (stop-gradient); a clipped PPO term, and one the dual clip
 * bounds, has zero gradient.
 */
export function referenceLossGradient(spec: LossSpec, input: LossInput): Float64Array {
  const n = input.logprob.length;
  referenceLoss(spec, input); // validates lengths
  const { unitOf, sumD, sumMismatch, count } = unitSums(spec, input);
  const masked = (u: number): boolean =>
    spec.mismatchThreshold !== undefined && Math.exp((sumMismatch.get(u) as number) / (count.get(u) as number)) > spec.mismatchThreshold;
  const grad = new Float64Array(n);
  // For clip objectives the unit's ratio depends on every term of the unit: accumulate per unit, spread by 1/|u|.
  const perUnit = new Map<number, number>();
  for (let t = 0; t < n; t++) {
    const u = unitOf(t);
    if (masked(u)) continue;
    const rho = Math.exp((sumD.get(u) as number) / (count.get(u) as number));
    const clippedRho = Math.min(Math.max(rho, 1 - spec.epsLow), 1 + spec.epsHigh);
    const a = input.advantage[t] as number;
    const w = input.weight[t] as number;
    const dualBound = spec.clipRatioC !== undefined && a < 0 && spec.clipRatioC * a > Math.min(rho * a, clippedRho * a);
    if (spec.objective === "cispo") {
      grad[t] = -w * clippedRho * a;
    } else if (!(clippedRho * a < rho * a) && !dualBound) {
      perUnit.set(u, (perUnit.get(u) ?? 0) - w * a * rho);
    }
  }
  if (spec.objective === "clip") {
    for (let t = 0; t < n; t++) {
      const u = unitOf(t);
      grad[t] = (perUnit.get(u) ?? 0) / (count.get(u) as number);
    }
  }
  return grad;
}
