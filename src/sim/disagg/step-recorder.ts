// A StepExecutor wrapper that records what each engine step did (its duration, prefill and decode
// work, KV traffic), so that a cluster can show where long prefills land: on a decode instance of a
// disaggregated cluster they should not, on a mixed instance they stall every decoding sequence.
import type { StepExecutor } from "../../engine/sim-engine.js";
import type { StepPlan, StepResult } from "../../engine/scheduler/step-plan.js";

/** Aggregates over the steps an instance ran (empty plans are not steps). */
export interface StepRecord {
  steps: number;
  /** Longest step, ms: the worst stall a decoding sequence of this instance saw. */
  maxStepMs: number;
  totalStepMs: number;
  /** Prompt tokens computed (chunks that are not a single decode token). */
  prefillTokens: number;
  /** Largest prefill chunk of one request in one step. */
  maxPrefillChunkTokens: number;
  /** Steps that contained at least one prefill chunk. */
  stepsWithPrefill: number;
  /** Decode tokens computed (one per decoding sequence per step). */
  decodeTokens: number;
  /** KV bytes the steps waited for, per direction. */
  bytesLoaded: number;
  bytesOffloaded: number;
}

/** Records every step of the executor it wraps; the step's result is passed through unchanged. */
export class StepRecorder implements StepExecutor {
  private readonly rec: StepRecord = {
    steps: 0,
    maxStepMs: 0,
    totalStepMs: 0,
    prefillTokens: 0,
    maxPrefillChunkTokens: 0,
    stepsWithPrefill: 0,
    decodeTokens: 0,
    bytesLoaded: 0,
    bytesOffloaded: 0,
  };

  constructor(private readonly inner: StepExecutor) {}

  run(plan: StepPlan): StepResult {
    const result = this.inner.run(plan);
    // SimEngine runs empty plans only to tell the executor what finished: no step, no time.
    if (plan.chunks.length === 0) return result;
    const r = this.rec;
    r.steps++;
    r.totalStepMs += result.durationMs;
    r.maxStepMs = Math.max(r.maxStepMs, result.durationMs);
    let prefill = false;
    for (const c of plan.chunks) {
      // The same split as the cost model's stepTimeBreakdown: one new token on top of KV is a decode.
      if (c.numNewTokens === 1 && c.numComputedTokens > 0) {
        r.decodeTokens++;
      } else {
        prefill = true;
        r.prefillTokens += c.numNewTokens;
        r.maxPrefillChunkTokens = Math.max(r.maxPrefillChunkTokens, c.numNewTokens);
      }
    }
    if (prefill) r.stepsWithPrefill++;
    for (const t of plan.transfers) {
      if (t.to === "L1") r.bytesLoaded += t.bytes;
      else if (t.from === "L1") r.bytesOffloaded += t.bytes;
    }
    return result;
  }

  /** The aggregates so far (a copy). */
  get record(): StepRecord {
    return { ...this.rec };
  }
}
