// Test harness for the scheduler, in the style of vLLM's scheduler tests: a scheduler over a small
// real KV block manager, and a fake executor that samples tokens from a seeded Rng.

import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { KvBlockManager, type KvBlockManagerOptions } from "../engine/kv/block-manager.js";
import { Scheduler, type FinishedRequest, type SchedulerConfig } from "../engine/scheduler/scheduler.js";
import type { SampledTokenOut, StepPlan } from "../engine/scheduler/step-plan.js";
import type { DraftBudget } from "../engine/specdec/draft-budget.js";

export interface Harness {
  clock: VirtualClock;
  kv: KvBlockManager;
  sched: Scheduler;
  rng: Rng;
  /** Every plan made so far. */
  plans: StepPlan[];
  /** Runs one step; `token` overrides the sampled token of a request. */
  step(token?: (requestId: string) => number | undefined): { plan: StepPlan; finished: FinishedRequest[] };
  /** Steps until nothing is unfinished (bounded); returns every finished request, in order. */
  runToEnd(maxSteps?: number): FinishedRequest[];
}

/** Token ids start..start+n-1. */
export function toks(n: number, start = 100): number[] {
  return Array.from({ length: n }, (_, i) => start + i);
}

/** Sampled tokens avoid 0..9 so that tests choose when a stop token appears. */
export function makeHarness(
  cfg: Partial<SchedulerConfig> = {},
  kvOpts: Partial<KvBlockManagerOptions> = {},
  seed = 1,
  draftBudget?: DraftBudget,
): Harness {
  const clock = new VirtualClock();
  const kv = new KvBlockManager({ blockSize: 4, numBlocks: 64, enablePrefixCaching: true, bytesPerToken: 2, ...kvOpts });
  const sched = new Scheduler(
    {
      maxNumBatchedTokens: 32,
      maxNumSeqs: 8,
      policy: "fcfs",
      enableChunkedPrefill: true,
      maxModelLen: 64,
      stopTokenIds: [0],
      maxWaiting: 100,
      ...cfg,
    },
    kv,
    clock,
    draftBudget,
  );
  const rng = new Rng(seed);
  const plans: StepPlan[] = [];
  const h: Harness = {
    clock,
    kv,
    sched,
    rng,
    plans,
    step(token) {
      const plan = sched.schedule();
      plans.push(plan);
      kv.checkInvariants();
      if (plan.chunks.length === 0) return { plan, finished: [] };
      const sampled = plan.chunks.map((c): SampledTokenOut | undefined => {
        if (!c.samples) return undefined;
        const tokenId = token?.(c.requestId) ?? rng.int(10, 999);
        return { tokenId, logprob: -rng.float() };
      });
      clock.advance(5);
      const finished = sched.onStepDone({ stepId: plan.stepId, sampled, durationMs: 5 });
      kv.checkInvariants();
      return { plan, finished };
    },
    runToEnd(maxSteps = 10_000) {
      const out: FinishedRequest[] = [];
      for (let i = 0; i < maxSteps && sched.hasUnfinished(); i++) out.push(...h.step().finished);
      if (sched.hasUnfinished()) throw new Error(`runToEnd: still unfinished after ${maxSteps} steps`);
      return out;
    },
  };
  return h;
}
