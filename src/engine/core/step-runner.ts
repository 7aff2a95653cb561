// The async step runner a ScheduledExecutor drives: it runs one scheduler StepPlan (llama.cpp for
// real tokens, the cost model for modelled time) and reports the sampled tokens. It keeps each
// request's tokens and sampling state between steps; the scheduler keeps everything else.
import type { Rng } from "../../core/rng.js";
import type { TokenLogprob } from "../sampling.js";
import type { StepPlan, StepResult } from "../scheduler/step-plan.js";

/** What a runner needs to know about a request to compute and sample its tokens. */
export interface RunnerRequest {
  promptTokenIds: readonly number[];
  maxTokens: number;
  temperature: number;
  topP: number;
  /** Alternatives to report per sampled token (0 = none). */
  topLogprobs: number;
  /** The request's own random stream: the same seed gives the same tokens whatever the batch. */
  rng: Rng;
  /** Workload annotation (cost model): the request ends with a stop token after this many tokens. */
  outputLength?: number;
}

/** A step's result plus the `topLogprobs` alternatives of each sampled token (absent = none). */
export interface RunnerStepResult extends StepResult {
  top?: Map<string, TokenLogprob[]>;
}

export interface StepRunner {
  /**
   * Run one plan (chunks of several requests together). Also handles the plan's bookkeeping:
   * `finished` requests are forgotten, `preempted` ones lose their KV claim. An empty plan only
   * carries that bookkeeping and returns at once.
   */
  run(plan: StepPlan, kvTokensOf: (requestId: string) => number): Promise<RunnerStepResult>;
  /** Register a request before the scheduler first plans it. */
  addRequest(requestId: string, req: RunnerRequest): void;
  /** Forget a request the scheduler never planned or already listed as finished (between steps only). */
  removeRequest(requestId: string): void;
  close(): Promise<void>;
}
