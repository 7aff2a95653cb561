// The contract between the engine's request scheduler and its executors (vLLM v1's SchedulerOutput
// and ModelRunnerOutput, reduced to what Arbor needs). The scheduler decides; an executor (llama.cpp
// or the cost model) runs one step of the plan and reports what it sampled.

/** One request's share of a step. */
export interface ScheduledChunk {
  requestId: string;
  /** Tokens this step computes for the request: a prefill chunk, or 1 for a decode step. */
  numNewTokens: number;
  /** Tokens of the request already in KV before this step (prefix-cache hits included). */
  numComputedTokens: number;
  /** True when the step ends the prompt or decodes: the executor samples one token for it. */
  samples: boolean;
  /**
   * Speculative decoding: draft tokens fed after the request's last token in the same evaluation
   * (counted in numNewTokens, not in the request's tokens); the executor verifies them and may
   * report several tokens for the request (StepResult.moreTokens). Only on a decode chunk.
   */
  draftTokenIds?: number[];
}

/** KV traffic between tiers that a step waits for (the cost model charges it by bandwidth). */
export interface KvTransfer {
  /** Where the blocks come from / go to. */
  from: "L1" | "L2" | "L3";
  to: "L1" | "L2" | "L3";
  blocks: number;
  bytes: number;
}

/** What to run in one engine step. */
export interface StepPlan {
  stepId: number;
  /** Scheduler clock time (ms) when the plan was made. */
  now: number;
  chunks: ScheduledChunk[];
  /** Σ numNewTokens (≤ the token budget). */
  numBatchedTokens: number;
  /** Requests preempted (by recompute) while making this plan. */
  preempted: string[];
  /** Requests that finished since the previous plan (aborted ones included); their KV is freed. */
  finished: string[];
  transfers: KvTransfer[];
}

/** One sampled token. */
export interface SampledTokenOut {
  tokenId: number;
  logprob: number;
}

/**
 * What an executor reports after running a plan. Every list is aligned with the plan's chunks (entry k is
 * chunks[k]'s, as vLLM's ModelRunnerOutput lists by batch position): the scheduler reads a chunk's tokens
 * by position, with no lookup by request id for every simulated token.
 */
export interface StepResult {
  stepId: number;
  /** sampled[k]: the token of chunks[k] when it has `samples: true` (undefined for the others). */
  sampled: (SampledTokenOut | undefined)[];
  /**
   * Speculative decoding: the tokens a verified chunk produced after its first one, in order (one
   * per accepted draft token, then the target's own token). At most the chunk's draft length.
   */
  moreTokens?: (SampledTokenOut[] | undefined)[];
  /** Draft tokens proposed for the chunk's request's next step (the scheduler plans them as draftTokenIds). */
  drafts?: (number[] | undefined)[];
  /** Time the step took (measured for llama.cpp, modelled for the cost model), ms. */
  durationMs: number;
}
