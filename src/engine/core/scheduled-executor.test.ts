import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { ArborError } from "../../core/errors.js";
import { Rng } from "../../core/rng.js";
import type { StepPlan } from "../scheduler/step-plan.js";
import { engineConfig } from "./scheduled-engines.js";
import { ScheduledExecutor } from "./scheduled-executor.js";
import type { RunnerStepResult, StepRunner } from "./step-runner.js";

/** Samples token 7 for every sampling chunk; fails the step whose id is `failAt`. */
class FakeRunner implements StepRunner {
  readonly plans: StepPlan[] = [];
  closed = false;
  constructor(private readonly failAt = -1) {}
  addRequest(): void {}
  removeRequest(): void {}
  async run(plan: StepPlan): Promise<RunnerStepResult> {
    if (plan.chunks.length > 0) this.plans.push(plan);
    if (plan.stepId === this.failAt) throw new Error("device lost");
    const sampled = plan.chunks.map((c) => (c.samples ? { tokenId: 7, logprob: -0.5 } : undefined));
    return { stepId: plan.stepId, sampled, durationMs: 1 };
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

function make(runner: StepRunner): ScheduledExecutor {
  const cfg = engineConfig({ sequences: 2, contextSize: 32, maxWaiting: 1, stopTokenIds: [0], blockSize: 4 });
  return new ScheduledExecutor({ runner, vocabSize: 50, tokenize: () => [], ...cfg, clock: new VirtualClock() });
}

const req = (maxTokens: number) => ({ promptTokenIds: [1, 2, 3], maxTokens, temperature: 0, topP: 1, topLogprobs: 0, rng: new Rng(1) });

describe("ScheduledExecutor", () => {
  it("fails the requests of a broken step with a clear error and keeps serving", async () => {
    const e = make(new FakeRunner(1));
    await expect(e.generate(req(5))).rejects.toThrow(/engine step 1 failed: device lost/);
    const r = await e.generate(req(2));
    expect(r.tokens.map((t) => t.id)).toEqual([7, 7]);
    expect(r.finishReason).toBe("length");
    await e.close();
  });

  it("validates input and bounds the queue", async () => {
    const e = make(new FakeRunner());
    await expect(e.generate({ ...req(1), promptTokenIds: [] })).rejects.toBeInstanceOf(RangeError);
    await expect(e.generate({ ...req(1), promptTokenIds: [99] })).rejects.toThrow(/outside the vocabulary/);
    await expect(e.generate(req(40))).rejects.toThrow(/exceeds the context/);
    // sequences (2) + maxWaiting (1) are accepted at once; the next is refused.
    const ok = [e.generate(req(1)), e.generate(req(1)), e.generate(req(1))];
    await expect(e.generate(req(1))).rejects.toMatchObject({ code: "capacity" });
    expect((await Promise.all(ok)).every((r) => r.tokens.length === 1)).toBe(true);
    await e.close();
  });

  it("close rejects pending requests and closes the runner", async () => {
    const runner = new FakeRunner();
    const e = make(runner);
    const p = e.generate(req(10));
    await e.close();
    await expect(p).rejects.toBeInstanceOf(ArborError);
    expect(runner.closed).toBe(true);
    await expect(e.generate(req(1))).rejects.toThrow(/shut down/);
  });
});
