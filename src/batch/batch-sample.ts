// The batch builder's sample: one token sequence (one call, or several calls of one program merged) with a
// per-token loss mask, behaviour logprob, policy version and chunk, plus the per-program outcomes that
// advantage estimators normalise over. Token-in/token-out: ids and logprobs are the engine's, never re-derived.

/** One training sequence. Every per-token array has `tokenIds.length` entries. */
export interface BatchSample {
  /** Unique within a batch: the call id (per-call samples) or `${programId}#s${segment}` (merged). */
  id: string;
  programId: string;
  groupId: string;
  taskId: string;
  /** Calls whose tokens the sample holds, in order. */
  callIds: string[];
  /** Segment of the program (a context reset starts a new one); 0 for per-call samples' first segment. */
  segment: number;
  tokenIds: number[];
  /** 1 exactly on tokens the model generated (call outputs); 0 on prompts, tool output, context edits. */
  lossMask: number[];
  /** Behaviour (engine) logprob of each model token; 0 where the mask is 0. */
  oldLogprobs: number[];
  /** Policy version that generated each token; -1 where the mask is 0. */
  versions: number[];
  /** Chunk (ordinal of the call among its program's trainable calls) of each model token; -1 where the mask is 0. */
  chunks: number[];
}

/** What estimators need of one program: its group, its reward and its chunks. */
export interface ProgramOutcome {
  programId: string;
  groupId: string;
  reward: number;
  /** K: the number of chunks (trainable calls) of the program; chunk ids run 0..K-1. */
  chunkCount: number;
  /** Model tokens of each chunk (for overlong shaping). */
  chunkLengths: number[];
  /** Optional per-chunk rewards (process rewards) for reward-to-go; absent = only the final reward. */
  stepRewards?: number[];
  /** The reward's `outcome` component (the env checker's score; solved at 1), when the reward has one. */
  outcome?: number;
}

/** Samples plus the outcome of every program of the batch's groups (programs with no trainable call included). */
export interface SampleSet {
  samples: BatchSample[];
  programs: ProgramOutcome[];
}

/** A sample with the estimator's per-token advantages and loss weights (0 where the mask is 0). */
export interface ScoredSample extends BatchSample {
  advantages: number[];
  weights: number[];
}
