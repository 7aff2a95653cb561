// The `costmodel` executor: runs a step plan without computing any real token. Token ids and logprobs
// come from seeded random streams, output lengths from workload annotations, and the step's duration
// from the cost profile, so the simulator can drive the real scheduler under a virtual clock.
import { ArborError } from "../../core/errors.js";
import type { Rng } from "../../core/rng.js";
import type { SampledTokenOut, StepPlan, StepResult } from "../scheduler/step-plan.js";
import { validateCostProfile, type CostProfile } from "./profile.js";
import { stepTimeMs } from "./step-time.js";

export interface CostModelExecutorOptions {
  /** Token ids are drawn from 0..vocabSize-1. */
  vocabSize: number;
  /** Ids that end a generation; drawn only at the annotated output length. */
  stopTokenIds: number[];
}

interface RequestState {
  rng: Rng;
  /** Tokens sampled so far (kept across preemption: recompute does not redo sampling). */
  sampled: number;
  /** Annotated output length (stop token included), if any. */
  outputLength?: number;
}

/** Executor that models time instead of computing tokens; deterministic for a seed. */
export class CostModelExecutor {
  readonly profile: CostProfile;
  private readonly vocabSize: number;
  /** Stop ids, sorted and deduplicated. */
  private readonly stops: number[];
  private readonly requests = new Map<string, RequestState>();
  private readonly annotations = new Map<string, number>();

  constructor(
    profile: CostProfile,
    private readonly rng: Rng,
    opts: CostModelExecutorOptions,
  ) {
    this.profile = validateCostProfile(profile);
    if (!Number.isInteger(opts.vocabSize) || opts.vocabSize < 1) {
      throw new ArborError(`costmodel executor: vocabSize must be an integer >= 1 (got ${opts.vocabSize})`, "config");
    }
    for (const id of opts.stopTokenIds) {
      if (!Number.isInteger(id) || id < 0 || id >= opts.vocabSize) {
        throw new ArborError(`costmodel executor: stop token id ${id} is outside 0..${opts.vocabSize - 1}`, "config");
      }
    }
    this.vocabSize = opts.vocabSize;
    this.stops = [...new Set(opts.stopTokenIds)].sort((a, b) => a - b);
    if (this.stops.length >= this.vocabSize) {
      throw new ArborError("costmodel executor: every token id is a stop token", "config");
    }
  }

  /**
   * Workload annotation: the request's n-th sampled token is a stop token (so it finishes with
   * reason `stop` after exactly n tokens). Without one, a request never samples a stop token and runs
   * to its max_tokens. Should a scheduler keep a request past n (ignoring the stop), later tokens are
   * non-stop again: finishing is the scheduler's decision, not the executor's.
   */
  setOutputLength(requestId: string, n: number): void {
    if (!Number.isInteger(n) || n < 1) {
      throw new ArborError(`costmodel executor: output length of ${requestId} must be an integer >= 1 (got ${n})`, "engine");
    }
    if (this.stops.length === 0) {
      throw new ArborError(`costmodel executor: output length of ${requestId} needs a stop token, and stopTokenIds is empty`, "engine");
    }
    this.annotations.set(requestId, n);
    const st = this.requests.get(requestId);
    if (st) st.outputLength = n;
  }

  /**
   * Runs one step: forgets finished requests, samples one token for every chunk with `samples`, and
   * reports the modelled duration (stepTimeMs).
   */
  run(plan: StepPlan, kvTokensOf: (requestId: string) => number): StepResult {
    for (const id of plan.finished) {
      this.requests.delete(id);
      this.annotations.delete(id);
    }
    const durationMs = stepTimeMs(this.profile, plan, kvTokensOf);
    const sampled = new Map<string, SampledTokenOut>();
    for (const c of plan.chunks) {
      if (!c.samples) continue;
      if (sampled.has(c.requestId)) {
        throw new ArborError(`step ${plan.stepId}: ${c.requestId} is scheduled twice`, "engine");
      }
      sampled.set(c.requestId, this.sample(this.state(c.requestId)));
    }
    return { stepId: plan.stepId, sampled, durationMs };
  }

  /** Requests the executor holds state for (annotated or sampled, not yet finished). */
  get trackedRequests(): number {
    return new Set([...this.requests.keys(), ...this.annotations.keys()]).size;
  }

  private state(requestId: string): RequestState {
    let st = this.requests.get(requestId);
    if (!st) {
      // One stream per request: its tokens do not depend on what it was batched with.
      st = { rng: this.rng.fork(`costmodel:${requestId}`), sampled: 0 };
      const n = this.annotations.get(requestId);
      if (n !== undefined) st.outputLength = n;
      this.requests.set(requestId, st);
    }
    return st;
  }

  private sample(st: RequestState): SampledTokenOut {
    st.sampled++;
    let tokenId: number;
    if (st.outputLength !== undefined && st.sampled === st.outputLength) {
      tokenId = st.rng.pick(this.stops);
    } else {
      // k-th non-stop id: walk the sorted stop ids, skipping each one at or below the candidate.
      tokenId = st.rng.int(0, this.vocabSize - this.stops.length - 1);
      for (const s of this.stops) {
        if (s <= tokenId) tokenId++;
        else break;
      }
    }
    // log of a uniform draw in (0, 1]: always <= 0.
    const logprob = Math.log(1 - st.rng.float());
    return { tokenId, logprob };
  }
}
