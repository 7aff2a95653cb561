// Speculative decoding at GPU scale on the cost model (`arbor bench specdec` table (d)): n requests on one
// simulated engine — the production scheduler and KV manager, the cost-model executor with modelled
// speculation — under the virtual clock, with no speculation, every draft verified, and Seer's adaptive
// budget. Deterministic: the same arguments give the same makespan and tokens.
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import { acceptanceForMeanLength, CostModelExecutor } from "../engine/costmodel/costmodel-executor.js";
import type { CostProfile } from "../engine/costmodel/profile.js";
import { KvBlockManager } from "../engine/kv/block-manager.js";
import { Scheduler } from "../engine/scheduler/scheduler.js";
import { DraftBudget } from "../engine/specdec/draft-budget.js";

const STOP = 0;

/** One simulated workload. */
export interface SpecSimOptions {
  profile: CostProfile;
  requests: number;
  promptTokens: number;
  outputTokens: number;
  /** Draft tokens per step at most. */
  maxSpecTokens: number;
  /** Measured mean acceptance length the acceptance model is fitted to. */
  meanAcceptanceLength: number;
  mode: "none" | "full" | "adaptive";
  seed?: number;
}

/** What a simulation measured. */
export interface SpecSimResult {
  /** Modelled time until the last request finished, ms. */
  ms: number;
  /** Every request's output tokens, by request id. */
  outputs: number[][];
  /** Draft tokens verified. */
  draftTokens: number;
  /** Draft tokens accepted. */
  acceptedTokens: number;
}

/** Run one workload to its end (see the file header). */
export function simulateSpeculation(o: SpecSimOptions): SpecSimResult {
  const clock = new VirtualClock();
  const contextLen = o.promptTokens + o.outputTokens + o.maxSpecTokens + 16;
  const numBlocks = Math.floor(o.profile.hbmKvCapacityTokens / o.profile.blockSize);
  const kv = new KvBlockManager({ blockSize: o.profile.blockSize, numBlocks, enablePrefixCaching: true, bytesPerToken: o.profile.kvBytesPerToken });
  const budget = o.mode === "adaptive" ? new DraftBudget({ maxPositions: o.maxSpecTokens }) : undefined;
  const sched = new Scheduler(
    { maxNumBatchedTokens: 8192, maxNumSeqs: Math.max(o.requests, 1), policy: "fcfs", enableChunkedPrefill: true, maxModelLen: contextLen, stopTokenIds: [STOP], maxWaiting: o.requests + 1 },
    kv,
    clock,
    budget,
  );
  const speculation = { maxSpecTokens: o.maxSpecTokens, acceptance: [acceptanceForMeanLength(o.meanAcceptanceLength, o.maxSpecTokens)] };
  const rng = new Rng(o.seed ?? 5);
  const exec = new CostModelExecutor(o.profile, rng.fork("engine"), { vocabSize: 128_256, stopTokenIds: [STOP], ...(o.mode !== "none" ? { speculation } : {}) });
  const prompts = rng.fork("prompts");
  for (let i = 0; i < o.requests; i++) {
    const id = `r${i}`;
    sched.addRequest({ requestId: id, promptTokenIds: Array.from({ length: o.promptTokens }, () => prompts.int(1, 128_000)), maxTokens: o.outputTokens + o.maxSpecTokens });
    exec.setOutputLength(id, o.outputTokens);
  }
  const outputs = new Map<string, number[]>();
  let draftTokens = 0;
  let acceptedTokens = 0;
  const maxSteps = (o.requests + 1) * (o.promptTokens + o.outputTokens) + 1000;
  for (let steps = 0; sched.hasUnfinished(); steps++) {
    if (steps > maxSteps) throw new Error(`specdec sim: not finished after ${maxSteps} steps`);
    const plan = sched.schedule();
    const result = exec.run(plan);
    plan.chunks.forEach((c, k) => {
      draftTokens += c.draftTokenIds?.length ?? 0;
      if (c.draftTokenIds) acceptedTokens += result.moreTokens?.[k]?.length ?? 0;
    });
    clock.advance(result.durationMs);
    for (const f of sched.onStepDone(result)) outputs.set(f.requestId, f.outputTokenIds);
  }
  const ids = [...outputs.keys()].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
  return { ms: clock.now(), outputs: ids.map((id) => outputs.get(id) as number[]), draftTokens, acceptedTokens };
}
