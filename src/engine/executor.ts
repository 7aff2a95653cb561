// The executor contract: what the HTTP surface needs from whatever actually produces tokens
// (llama.cpp today; a calibrated cost model for simulation later). Token-in, token-out.
import type { Rng } from "../core/rng.js";
import type { ModelTokenizer } from "../model/tokenizer.js";
import type { KvStateEntry } from "./kv/state-tier.js";
import { checkSamplingControls, type SampledToken, type SamplingControls } from "./sampling.js";

/** One generation on one sequence. */
export interface GenerateRequest {
  /** Prompt token ids, used as-is (BOS and chat markers already in place). */
  promptTokenIds: readonly number[];
  /** Upper bound on generated tokens, stop token included. */
  maxTokens: number;
  temperature: number;
  topP: number;
  /** Alternatives to report per token (0 = none). */
  topLogprobs: number;
  /** This request's own random stream: the same seed gives the same tokens. */
  rng: Rng;
  /** vLLM's logit_bias, repetition_penalty, min_tokens, ignore_eos and stop_token_ids (absent = their defaults). */
  controls?: SamplingControls;
  /** Aborting ends the generation early with finish reason `abort` (or rejects while queued). */
  signal?: AbortSignal;
  /** Called with each token as soon as it is sampled (streaming); must not throw. */
  onToken?: (token: SampledToken) => void;
  /** The agent program this request belongs to (program-aware KV: pause, restore, reuse). */
  programId?: string;
  /** Lower = sooner, as vLLM; only executors with the "priority" scheduling policy use it (default 0). */
  priority?: number;
  /**
   * Speculative decoding (executors that speculate): the group whose responses draft for each other
   * (Seer: a GRPO group's siblings share one suffix tree). Ignored elsewhere.
   */
  draftGroupId?: string;
}

export type EngineFinishReason = "stop" | "length" | "abort";

export interface GenerateResult {
  /** Generated tokens with their logprobs; a stop token, when one ended the generation, is last. */
  tokens: SampledToken[];
  finishReason: EngineFinishReason;
  /** The stop token id that ended the generation (finishReason "stop"). */
  stopTokenId?: number;
}

/** Live load of an executor, read by /metrics and the scheduler. */
export interface ExecutorStats {
  /** Requests holding a sequence. */
  running: number;
  /** Requests waiting for a sequence. */
  waiting: number;
  /** KV cells in use across all sequences. */
  usedTokens: number;
  /** KV cells available across all sequences. */
  totalTokens: number;
  /** Prompt tokens looked up in the prefix cache (executors with one; vllm:prefix_cache_queries_total). */
  prefixCacheQueries?: number;
  /** Prompt tokens served from the prefix cache (vllm:prefix_cache_hits_total). */
  prefixCacheHits?: number;
  /** Running requests preempted so far (vllm:num_preemptions_total). */
  preemptions?: number;
  /** Speculative decoding's counters (vllm:spec_decode_num_*), on executors that speculate. */
  specDecode?: { numDrafts: number; numDraftTokens: number; numAcceptedTokens: number; draftServiceFailures?: number; draftServiceLocalSteps?: number };
}

/** Where a paused program's KV goes: this engine's host memory, the shared pool, or nowhere. */
export type ProgramPauseTarget = "L2" | "L3" | "drop";

/** Where a program's KV is and what of it waits: the answer of the program endpoints. */
export interface ProgramInfo {
  programId: string;
  /** Where the program was paused to; null when it is not paused. */
  paused: ProgramPauseTarget | null;
  /** Where its last context's KV is: a sequence (L1), a store (L2/L3), or nowhere known. */
  kv: "L1" | "L2" | "L3" | "none";
  /** Tokens that KV covers (0 for "none"). */
  kvTokens: number;
  /** Its requests held back by the pause. */
  heldRequests: number;
  /** Its requests running now. */
  runningRequests: number;
}

/** Program-aware hooks of executors that have them (ThunderAgent-style pause and restore). */
export interface ProgramControl {
  /**
   * Hold the program's new requests and move its KV to `to` ("drop" forgets it). Resolves once the
   * KV is saved, which waits for its requests running now to finish.
   */
  pause(programId: string, to: ProgramPauseTarget): Promise<ProgramInfo>;
  /** Let its held requests run again; its saved KV is loaded when its next request is scheduled. */
  restore(programId: string): Promise<ProgramInfo>;
  info(programId: string): ProgramInfo;
}

/** A sequence state as bytes (a llama.cpp sequence-state file) and what it holds. */
export interface ExportedState {
  entry: KvStateEntry;
  data: Buffer;
}

/**
 * Moving one request's KV between engines (prefill/decode disaggregation through the global KV pool,
 * kv/state-pool.ts), on executors that hold real KV.
 */
export interface KvTransfer {
  /** The engine shape a state must come from to load here (model file, sequences, KV type). */
  readonly compat: string;
  /**
   * Export the context of the program's request: call it before submitting the request (or while
   * it runs). When the request finishes, its sequence's KV is saved in the same step that hands the
   * sequence back (before another request can take it), cleared from the sequence and resolved here.
   * Undefined when nothing was held (the request never ran) or {@link discardState} cancelled it.
   */
  exportState(programId: string): Promise<ExportedState | undefined>;
  /**
   * Hold a state for the program's next request, which loads it instead of recomputing those tokens.
   * Rejects with a "kv_incompatible" ArborError when `compat` differs from this engine's.
   */
  importState(programId: string, tokenIds: readonly number[], compat: string, data: Uint8Array): Promise<void>;
  /** Forget an imported state no request loaded (true when one was still held) and cancel a pending export. */
  discardState(programId: string): boolean;
}

export interface Executor {
  /** Tokens in the vocabulary (valid ids are 0..vocabSize-1). */
  readonly vocabSize: number;
  /** Context length of one sequence: prompt + generated tokens must fit in it. */
  readonly contextSize: number;
  /** Sequences decoded together. */
  readonly sequences: number;
  /** Plain-text tokenization (no BOS, control-token text not recognised). */
  tokenize(text: string): number[];
  /**
   * The loaded model's own tokenizer (llama.cpp's for a GGUF). Absent for executors that serve no
   * model file (the cost model, scripted test executors): they use Arbor's vocabulary.
   */
  readonly tokenizer?: ModelTokenizer;
  /** Run one request to completion; rejects with CapacityError when the waiting line is full. */
  generate(req: GenerateRequest): Promise<GenerateResult>;
  stats(): ExecutorStats;
  close(): Promise<void>;
  /** How waiting requests are ordered (absent = first come, first served; priorities ignored). */
  readonly schedulingPolicy?: "fcfs" | "priority";
  /** Program pause/restore, on executors that support it. */
  readonly programs?: ProgramControl;
  /** KV handoff between engines, on executors that hold real KV (the scheduled llama.cpp one). */
  readonly kvTransfer?: KvTransfer;
}

/**
 * Reject a request no executor can run: empty prompt, bad max_tokens, prompt + max_tokens over the
 * context, token ids outside the vocabulary. Throws RangeError (the HTTP layer validated the body
 * already; this guards direct callers).
 */
export function checkGenerateRequest(req: GenerateRequest, executor: Pick<Executor, "contextSize" | "vocabSize">): void {
  const prompt = req.promptTokenIds;
  if (prompt.length === 0) throw new RangeError("prompt must contain at least one token");
  if (!Number.isInteger(req.maxTokens) || req.maxTokens < 1) throw new RangeError(`maxTokens must be >= 1, got ${req.maxTokens}`);
  if (prompt.length + req.maxTokens > executor.contextSize) {
    throw new RangeError(`prompt (${prompt.length} tokens) + max_tokens (${req.maxTokens}) exceeds the context (${executor.contextSize})`);
  }
  for (const id of prompt) {
    if (!Number.isInteger(id) || id < 0 || id >= executor.vocabSize) throw new RangeError(`token id ${id} is outside the vocabulary (size ${executor.vocabSize})`);
  }
  if (req.controls) checkSamplingControls(req.controls, req.maxTokens, executor.vocabSize);
}
