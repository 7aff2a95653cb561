// The cost model's step time: how long one engine step of a StepPlan takes on a CostProfile.
// Pure, allocation-light arithmetic, so the simulator can call it for every step of thousands of runs.
import { ArborError } from "../../core/errors.js";
import type { KvTransfer, StepPlan } from "../scheduler/step-plan.js";
import type { CostProfile } from "./profile.js";

/** The parts of one step's time, ms. `totalMs` is their sum. */
export interface StepTimeBreakdown {
  /** max(prefillBase if any prefill chunk, decodeBase if any decoding sequence): one forward pass. */
  baseMs: number;
  /** prefillPerTokenMs × prefill tokens. */
  prefillMs: number;
  /** decodePerSeqMs × decoding sequences' tokens (a verified draft's tokens included). */
  decodeMs: number;
  /** attnPerKvTokenMs × (KV tokens of decoding sequences + cached prefix of prefill chunks). */
  attentionMs: number;
  /** MLP roofline over all batched tokens. */
  mlpMs: number;
  /** Loads into HBM (L2/L3 -> L1): Σ bytes / bandwidth, waited for before the forward pass. */
  loadMs: number;
  /** Stores out of HBM (L1 -> L2/L3): Σ bytes / bandwidth, copied beside the forward pass. */
  storeMs: number;
  /** What the step waits for transfers: loadMs plus whatever of storeMs the compute does not cover. */
  transferMs: number;
  totalMs: number;
}

/**
 * MLP time of a step with `batchedTokens` tokens: the memory-bound floor (weights streamed once) up
 * to the threshold, then the compute-bound cost per further token; 0 for an empty step.
 *   mlp(n) = n = 0 ? 0 : mlpMemoryBoundMs + mlpComputeBoundPerTokenMs × max(0, n − threshold)
 */
export function mlpTimeMs(profile: CostProfile, batchedTokens: number): number {
  if (batchedTokens <= 0) return 0;
  const over = Math.max(0, batchedTokens - profile.computeBoundThresholdTokens);
  return profile.mlpMemoryBoundMs + profile.mlpComputeBoundPerTokenMs * over;
}

/** Bandwidth of the link a transfer crosses: L3 when either end is L3, else device <-> host (L2). */
export function transferTimeMs(profile: CostProfile, t: KvTransfer): number {
  if (t.from === t.to) throw new ArborError(`KV transfer from ${t.from} to itself`, "engine");
  if (!Number.isFinite(t.bytes) || t.bytes < 0) {
    throw new ArborError(`KV transfer ${t.from}->${t.to}: bytes must be a finite number >= 0 (got ${t.bytes})`, "engine");
  }
  const bw = t.from === "L3" || t.to === "L3" ? profile.l3BandwidthBytesPerMs : profile.l2BandwidthBytesPerMs;
  return t.bytes / bw;
}

/**
 * Time of one engine step, split into its parts.
 *
 * KV transfers are asynchronous copies on their own stream, as in vLLM's offloading connector: a store
 * out of HBM (L1 -> L2/L3) runs beside the forward pass and costs the step only what the pass does not
 * cover; a load into HBM must land before the pass that reads it, so it adds its whole time.
 *
 * A chunk of one new token on top of existing KV is a decoding sequence (the last token of a chunked
 * prompt is computed the same way, so it is costed the same); so is a decode chunk that verifies k draft
 * tokens (speculative decoding), whose 1 + k tokens each pay the per-token GEMMs and the MLP while the
 * KV is streamed once; any other chunk is prefill.
 *   C = max(P ? prefillBase : 0, D ? decodeBase : 0)        one forward pass, paid once
 *     + prefillPerToken × Σ_prefill numNewTokens
 *     + decodePerSeq × Σ_D numNewTokens                     (1 per sequence, 1 + k when verifying k drafts)
 *     + attnPerKvToken × (Σ_D (numComputedTokens + numNewTokens) + Σ_P numComputedTokens)
 *     + mlp(Σ numNewTokens)
 *   T = max(C + Σ_loads bytes / bandwidth(tier), Σ_stores bytes / bandwidth(tier))
 * Attention among the new tokens of a prefill chunk (quadratic in the chunk) has no term of its own:
 * the §F reference it is calibrated to is linear in prompt length, so it sits in the per-token cost.
 * A decoding sequence's attention reads its whole KV after the step (its new tokens included, as the
 * scheduler counts them computed once planned); a prefill chunk's reads its cached prefix.
 * Monotone non-decreasing in the number of chunks, prompt length, KV length and transfer bytes.
 */
export function stepTimeBreakdown(profile: CostProfile, plan: StepPlan): StepTimeBreakdown {
  const out: StepTimeBreakdown = { baseMs: 0, prefillMs: 0, decodeMs: 0, attentionMs: 0, mlpMs: 0, loadMs: 0, storeMs: 0, transferMs: 0, totalMs: 0 };
  stepTime(profile, plan, out);
  return out;
}

/** Time of one engine step for `plan`, ms (see stepTimeBreakdown for the formula). */
export function stepTimeMs(profile: CostProfile, plan: StepPlan): number {
  return stepTime(profile, plan, undefined);
}

/**
 * The step's time, and its parts in `out` when given. The simulator asks only the total, at every step of
 * every engine: kept in locals, the parts allocate nothing (an object of nine numbers is ten allocations).
 */
function stepTime(profile: CostProfile, plan: StepPlan, out: StepTimeBreakdown | undefined): number {
  let prefillTokens = 0;
  let prefillChunks = 0;
  let decodeSeqs = 0;
  /** Decoding sequences' tokens: one each, plus the draft tokens a verification adds. */
  let decodeTokens = 0;
  let kvTokens = 0;
  for (const c of plan.chunks) {
    if (!Number.isInteger(c.numNewTokens) || c.numNewTokens < 1) {
      throw new ArborError(`step ${plan.stepId}: ${c.requestId}.numNewTokens must be an integer >= 1 (got ${c.numNewTokens})`, "engine");
    }
    if (!Number.isInteger(c.numComputedTokens) || c.numComputedTokens < 0) {
      throw new ArborError(`step ${plan.stepId}: ${c.requestId}.numComputedTokens must be an integer >= 0 (got ${c.numComputedTokens})`, "engine");
    }
    const drafted = c.draftTokenIds?.length ?? 0;
    if (c.numNewTokens === 1 + drafted && c.numComputedTokens > 0) {
      decodeSeqs++;
      decodeTokens += c.numNewTokens;
      kvTokens += c.numComputedTokens + c.numNewTokens;
    } else {
      prefillChunks++;
      prefillTokens += c.numNewTokens;
      kvTokens += c.numComputedTokens;
    }
  }
  const baseMs = Math.max(prefillChunks > 0 ? profile.prefillBaseMs : 0, decodeSeqs > 0 ? profile.decodeBaseMs : 0);
  const prefillMs = profile.prefillPerTokenMs * prefillTokens;
  const decodeMs = profile.decodePerSeqMs * decodeTokens;
  const attentionMs = profile.attnPerKvTokenMs * kvTokens;
  const mlpMs = mlpTimeMs(profile, prefillTokens + decodeTokens);
  let loadMs = 0;
  let storeMs = 0;
  // (An index loop: plan.transfers is mostly a shared frozen empty list, over which for-of allocates.)
  for (let i = 0; i < plan.transfers.length; i++) {
    const t = plan.transfers[i] as KvTransfer;
    if (t.to === "L1") loadMs += transferTimeMs(profile, t);
    else storeMs += transferTimeMs(profile, t);
  }
  const computeMs = baseMs + prefillMs + decodeMs + attentionMs + mlpMs;
  const totalMs = Math.max(computeMs + loadMs, storeMs);
  if (out !== undefined) {
    out.baseMs = baseMs;
    out.prefillMs = prefillMs;
    out.decodeMs = decodeMs;
    out.attentionMs = attentionMs;
    out.mlpMs = mlpMs;
    out.loadMs = loadMs;
    out.storeMs = storeMs;
    out.transferMs = totalMs - computeMs;
    out.totalMs = totalMs;
  }
  return totalMs;
}
