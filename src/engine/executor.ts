// The executor contract: what the HTTP surface needs from whatever actually produces tokens
// (llama.cpp today; a calibrated cost model for simulation later). Token-in, token-out.
import type { Rng } from "../core/rng.js";
import type { SampledToken } from "./sampling.js";

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
  /** Aborting ends the generation early with finish reason `abort` (or rejects while queued). */
  signal?: AbortSignal;
  /** Called with each token as soon as it is sampled (streaming); must not throw. */
  onToken?: (token: SampledToken) => void;
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
  /** Run one request to completion; rejects with CapacityError when the waiting line is full. */
  generate(req: GenerateRequest): Promise<GenerateResult>;
  stats(): ExecutorStats;
  close(): Promise<void>;
}
