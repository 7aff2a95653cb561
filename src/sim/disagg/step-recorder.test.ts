import { describe, expect, it } from "vitest";
import type { StepPlan, StepResult } from "../../engine/scheduler/step-plan.js";
import { StepRecorder } from "./step-recorder.js";

const plan = (p: Partial<StepPlan>): StepPlan => ({ stepId: 0, now: 0, chunks: [], numBatchedTokens: 0, preempted: [], finished: [], transfers: [], ...p });

describe("StepRecorder", () => {
  it("passes results through and aggregates prefill, decode, transfers and step times", () => {
    const durations = [5, 40, 0];
    let n = 0;
    const rec = new StepRecorder({
      run: (p): StepResult => ({ stepId: p.stepId, sampled: [], durationMs: durations[n++] ?? 0 }),
    });
    const r = rec.run(
      plan({
        chunks: [
          { requestId: "a", numNewTokens: 1, numComputedTokens: 10, samples: true },
          { requestId: "b", numNewTokens: 7, numComputedTokens: 32, samples: true },
        ],
        transfers: [{ from: "L3", to: "L1", blocks: 2, bytes: 64 }],
      }),
    );
    expect(r.durationMs).toBe(5);
    rec.run(
      plan({
        stepId: 1,
        chunks: [{ requestId: "c", numNewTokens: 1, numComputedTokens: 0, samples: true }],
        transfers: [{ from: "L1", to: "L3", blocks: 1, bytes: 32 }],
      }),
    );
    // An empty plan is not a step.
    rec.run(plan({ stepId: 2, finished: ["a"] }));
    expect(rec.record).toEqual({
      steps: 2,
      maxStepMs: 40,
      totalStepMs: 45,
      prefillTokens: 8,
      maxPrefillChunkTokens: 7,
      stepsWithPrefill: 2,
      decodeTokens: 1,
      bytesLoaded: 64,
      bytesOffloaded: 32,
    });
  });
});
