// The async step runner a ScheduledExecutor drives: it runs one scheduler StepPlan (llama.cpp for
// real tokens, the cost model for modelled time) and reports the sampled tokens. It keeps each
// request's tokens and sampling state between steps; the scheduler keeps everything else.
import type { Rng } from "../../core/rng.js";
import type { KvTransfer, ProgramPauseTarget } from "../executor.js";
import type { KvTierName } from "../kv/tier.js";
import type { SamplingControls, StopRule, TokenLogprob } from "../sampling.js";
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
  /** vLLM's logit controls and stop rules (the scheduler decides stops; runners sample under them). */
  controls?: SamplingControls;
  /** The request's stop rule: which tokens min_tokens suppresses until enough were generated. */
  stop?: StopRule;
  /** Workload annotation (cost model): the request ends with a stop token after this many tokens. */
  outputLength?: number;
  /** The program the request belongs to: its KV may be saved on pause and loaded back for it. */
  programId?: string;
  /** Speculative decoding: the group whose responses draft for each other (see GenerateRequest). */
  draftGroupId?: string;
}

/** Runners that hold real KV move a paused program's last context between tiers. */
export interface RunnerProgramKv {
  /** The tiers this runner can save to. */
  readonly tiers: readonly KvTierName[];
  /**
   * Save the program's last context to `to` and free its sequence ("drop" forgets any saved
   * state). Resolves once saved: after the program's requests holding a sequence have finished.
   */
  pauseProgram(programId: string, to: ProgramPauseTarget): Promise<void>;
  /** Where the program's last context's KV is, and how many tokens it covers. */
  programKv(programId: string): { where: "L1" | "L2" | "L3" | "none"; tokens: number };
  /**
   * Make the state of the program that the shared L3 tier holds now loadable here (a program
   * restored on an engine other than the one that paused it). Nothing when this runner holds the
   * program's KV in L1/L2 or its L3 is not shared across processes.
   */
  prefetchProgram?(programId: string): Promise<void>;
}


/** A step's result plus the `topLogprobs` alternatives of each sampled token (absent = none), by chunk as `sampled`. */
export interface RunnerStepResult extends StepResult {
  top?: (TokenLogprob[] | undefined)[];
  /** The alternatives of each of `moreTokens`' tokens, in order. */
  moreTop?: (TokenLogprob[][] | undefined)[];
}

export interface StepRunner {
  /**
   * Run one plan (chunks of several requests together). Also handles the plan's bookkeeping:
   * `finished` requests are forgotten, `preempted` ones lose their KV claim. An empty plan only
   * carries that bookkeeping and returns at once.
   */
  run(plan: StepPlan): Promise<RunnerStepResult>;
  /** Register a request before the scheduler first plans it. */
  addRequest(requestId: string, req: RunnerRequest): void;
  /** Forget a request the scheduler never planned or already listed as finished (between steps only). */
  removeRequest(requestId: string): void;
  close(): Promise<void>;
  /** Program KV movement, on runners that hold real KV (llama.cpp). */
  readonly programs?: RunnerProgramKv;
  /** KV handoff to and from other engines, on runners that hold real KV (llama.cpp). */
  readonly transfer?: KvTransfer;
  /** Speculative decoding's counters since load, on runners that draft (absent: speculation off). */
  specDecodeStats?(): SpecDecodeStats;
}

/** Speculative decoding's counters (vLLM's spec_decode metrics). */
export interface SpecDecodeStats {
  /** Steps that verified a draft for a request. */
  numDrafts: number;
  /** Draft tokens verified. */
  numDraftTokens: number;
  /** Draft tokens accepted. */
  numAcceptedTokens: number;
  /** With a shared draft service (`speculative.draftService`): its calls that failed. */
  draftServiceFailures?: number;
  /** With a shared draft service: steps that drafted from the engine's own group trees instead. */
  draftServiceLocalSteps?: number;
}

/** Tokens a verification step produced on average: 1 + accepted draft tokens per draft (vLLM's mean acceptance length); 0 before any draft. */
export function meanAcceptanceLength(s: SpecDecodeStats): number {
  return s.numDrafts > 0 ? 1 + s.numAcceptedTokens / s.numDrafts : 0;
}
