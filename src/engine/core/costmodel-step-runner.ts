// Runs scheduler step plans on the cost model: no real tokens, modelled step time. Under the real
// clock the step really lasts its modelled duration (clock.sleep), so an HTTP engine serves with a
// large GPU's timing on a laptop; under a VirtualClock the same code advances simulated time.
import type { Clock } from "../../core/clock.js";
import { realClock } from "../../core/real-clock.js";
import { Rng } from "../../core/rng.js";
import { CostModelExecutor, type ModelledSpeculation } from "../costmodel/costmodel-executor.js";
import type { CostProfile } from "../costmodel/profile.js";
import type { StepPlan } from "../scheduler/step-plan.js";
import type { RunnerRequest, RunnerStepResult, SpecDecodeStats, StepRunner } from "./step-runner.js";

export interface CostModelStepRunnerOptions {
  profile: CostProfile;
  /** Token ids are drawn from 0..vocabSize-1. */
  vocabSize: number;
  /** Drawn only at a request's annotated output length (RunnerRequest.outputLength). */
  stopTokenIds: number[];
  /** Seeds the per-request token streams (default 0). */
  seed?: number;
  clock?: Clock;
  /** Modelled speculative decoding (costmodel-executor.ts); off when absent. */
  speculation?: ModelledSpeculation;
}

/**
 * A StepRunner over CostModelExecutor. A request without an output-length annotation runs to its
 * max_tokens (finish reason "length"); with one it ends with a stop token after that many tokens.
 */
export class CostModelStepRunner implements StepRunner {
  readonly executor: CostModelExecutor;
  private readonly clock: Clock;
  private stepsRun = 0;
  private modelledMs = 0;
  private readonly spec: SpecDecodeStats = { numDrafts: 0, numDraftTokens: 0, numAcceptedTokens: 0 };
  /** Speculation's counters (vllm:spec_decode_*), on a runner that speculates. */
  readonly specDecodeStats?: () => SpecDecodeStats;

  constructor(opts: CostModelStepRunnerOptions) {
    this.executor = new CostModelExecutor(opts.profile, new Rng(opts.seed ?? 0), {
      vocabSize: opts.vocabSize,
      stopTokenIds: opts.stopTokenIds,
      ...(opts.speculation ? { speculation: opts.speculation } : {}),
    });
    this.clock = opts.clock ?? realClock;
    if (opts.speculation) this.specDecodeStats = () => ({ ...this.spec });
  }

  /** Steps run and the modelled time they took, ms. */
  get usage(): { steps: number; modelledMs: number } {
    return { steps: this.stepsRun, modelledMs: this.modelledMs };
  }

  addRequest(requestId: string, req: RunnerRequest): void {
    if (req.outputLength !== undefined) this.executor.setOutputLength(requestId, req.outputLength);
  }

  removeRequest(requestId: string): void {
    // The executor forgets requests listed as finished; an empty plan does exactly that.
    this.executor.run({ stepId: -1, now: this.clock.now(), chunks: [], numBatchedTokens: 0, preempted: [], finished: [requestId], transfers: [] });
  }

  async run(plan: StepPlan): Promise<RunnerStepResult> {
    const result = this.executor.run(plan);
    if (plan.chunks.length === 0) return { ...result, durationMs: 0 };
    plan.chunks.forEach((c, k) => {
      const drafted = c.draftTokenIds?.length ?? 0;
      if (drafted === 0 || result.sampled[k] === undefined) return;
      this.spec.numDrafts++;
      this.spec.numDraftTokens += drafted;
      this.spec.numAcceptedTokens += result.moreTokens?.[k]?.length ?? 0;
    });
    this.stepsRun++;
    this.modelledMs += result.durationMs;
    await this.clock.sleep(result.durationMs);
    return result;
  }

  async close(): Promise<void> {
    // Nothing native to release.
  }
}
