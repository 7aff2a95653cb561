import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { realClock } from "../../core/real-clock.js";
import { Rng } from "../../core/rng.js";
import { ROUND_PROFILE } from "../../testing/costmodel-helpers.js";
import type { CostProfile } from "../costmodel/profile.js";
import { stepTimeMs } from "../costmodel/step-time.js";
import type { StepPlan } from "../scheduler/step-plan.js";
import { CostModelStepRunner } from "./costmodel-step-runner.js";
import { createCostModelEngine } from "./scheduled-engines.js";
import type { RunnerStepResult } from "./step-runner.js";

const VOCAB = 300;
const tokenize = (text: string): number[] => Array.from(text, (ch) => (ch.codePointAt(0) ?? 0) % VOCAB);
const toks = (n: number, start = 20): number[] => Array.from({ length: n }, (_, i) => start + i);

/** Let the engine loop run until it waits on the clock again. */
async function flush(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

function engine(clock: VirtualClock | typeof realClock, profile: CostProfile, steps: { plan: StepPlan; result: RunnerStepResult }[]) {
  return createCostModelEngine({
    profile,
    vocabSize: VOCAB,
    tokenize,
    sequences: 4,
    contextSize: 64,
    maxWaiting: 8,
    stopTokenIds: [0],
    clock,
    seed: 5,
    onStep: (plan, result) => steps.push({ plan, result }),
  });
}

describe("CostModelStepRunner under a VirtualClock", () => {
  it("takes exactly the modelled time per step and runs to max_tokens", async () => {
    const clock = new VirtualClock();
    const steps: { plan: StepPlan; result: RunnerStepResult }[] = [];
    const e = engine(clock, ROUND_PROFILE, steps);
    let done: number[] | undefined;
    const p = e.generate({ promptTokenIds: toks(10), maxTokens: 3, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(1) }).then((r) => {
      done = r.tokens.map((t) => t.id);
      return r;
    });
    await flush();
    // Prefill of 10 tokens: prefillBase 10 + 10 × 1 + MLP 2 + 0.1 × (10 − 4) = 22.6 ms.
    expect(clock.pendingTimers).toBe(1);
    clock.advance(22.5);
    await flush();
    expect(steps).toHaveLength(0);
    clock.advance(0.1);
    await flush();
    expect(steps).toHaveLength(1);
    expect(steps[0]!.result.durationMs).toBeCloseTo(22.6, 9);
    for (let i = 0; i < 10 && done === undefined; i++) {
      clock.advance(100);
      await flush();
    }
    const r = await p;
    expect(r.finishReason).toBe("length");
    expect(r.tokens).toHaveLength(3);
    expect(steps).toHaveLength(3);
    // Each step's duration is the cost model's for its plan.
    for (const s of steps) expect(s.result.durationMs).toBe(stepTimeMs(ROUND_PROFILE, s.plan));
    expect(e.stats()).toMatchObject({ running: 0, waiting: 0, prefixCacheQueries: 10 });
    await e.close();
  });

  it("batches concurrent requests into one step and is deterministic for a seed", async () => {
    const run = async (): Promise<number[][]> => {
      const clock = new VirtualClock();
      const steps: { plan: StepPlan; result: RunnerStepResult }[] = [];
      const e = engine(clock, ROUND_PROFILE, steps);
      const ps = [0, 1, 2].map((k) => e.generate({ promptTokenIds: toks(6, 30 + k), maxTokens: 4, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(k) }));
      for (let i = 0; i < 20; i++) {
        await flush();
        clock.advance(50);
      }
      const rs = await Promise.all(ps);
      expect(steps[0]!.plan.chunks).toHaveLength(3);
      expect(steps).toHaveLength(4);
      await e.close();
      return rs.map((r) => r.tokens.map((t) => t.id));
    };
    const a = await run();
    expect(a.every((t) => t.length === 4)).toBe(true);
    expect(await run()).toEqual(a);
  });

  it("ends a request with a stop token at its annotated output length", async () => {
    const clock = new VirtualClock();
    const runner = new CostModelStepRunner({ profile: ROUND_PROFILE, vocabSize: VOCAB, stopTokenIds: [0], clock });
    runner.addRequest("a", { promptTokenIds: toks(4), maxTokens: 10, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(1), outputLength: 2 });
    const plan = (stepId: number, n: number, computed: number): StepPlan => ({
      stepId,
      now: clock.now(),
      chunks: [{ requestId: "a", numNewTokens: n, numComputedTokens: computed, samples: true }],
      numBatchedTokens: n,
      preempted: [],
      finished: [],
      transfers: [],
    });
    const first = runner.run(plan(0, 4, 0));
    clock.advance(1000);
    expect((await first).sampled[0]!.tokenId).not.toBe(0);
    const second = runner.run(plan(1, 1, 4));
    clock.advance(1000);
    expect((await second).sampled[0]!.tokenId).toBe(0);
    expect(runner.usage.steps).toBe(2);
  });
});

describe("CostModelStepRunner under the real clock", () => {
  it("serves with modelled timing", async () => {
    const tiny: CostProfile = { ...ROUND_PROFILE, prefillBaseMs: 3, prefillPerTokenMs: 0.1, decodeBaseMs: 3, decodePerSeqMs: 0, mlpMemoryBoundMs: 0, attnPerKvTokenMs: 0, mlpComputeBoundPerTokenMs: 0 };
    const steps: { plan: StepPlan; result: RunnerStepResult }[] = [];
    const e = engine(realClock, tiny, steps);
    const start = realClock.now();
    const r = await e.generate({ promptTokenIds: toks(10), maxTokens: 5, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(1) });
    const elapsed = realClock.now() - start;
    expect(r.tokens).toHaveLength(5);
    const modelled = steps.reduce((s, x) => s + x.result.durationMs, 0);
    expect(modelled).toBeCloseTo(4 + 4 * 3, 9);
    // Timers may fire up to ~1 ms early per step at millisecond resolution.
    expect(elapsed).toBeGreaterThanOrEqual(modelled - steps.length);
    await e.close();
  });
});
