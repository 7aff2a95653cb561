// Property test: random configs and workloads (arrivals, shared prefixes, aborts, stop tokens,
// program pauses) must keep the scheduler's contract: every request finishes exactly once, within
// its limits; every plan respects the budget and maxNumSeqs; KV invariants hold after every step.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CapacityError } from "../../core/errors.js";
import { InProcessKvTier } from "../kv/tier.js";
import type { FinishedRequest, SchedulerConfig } from "./scheduler.js";
import { makeHarness } from "../../testing/scheduler-helpers.js";

const configArb = fc
  .record({
    blockSize: fc.constantFrom(1, 2, 4, 8),
    extraBlocks: fc.integer({ min: 0, max: 24 }),
    maxModelLen: fc.integer({ min: 4, max: 40 }),
    budget: fc.integer({ min: 1, max: 48 }),
    maxNumSeqs: fc.integer({ min: 1, max: 6 }),
    policy: fc.constantFrom("fcfs" as const, "priority" as const),
    chunked: fc.boolean(),
    threshold: fc.constantFrom(0, 3, 8),
    prefix: fc.boolean(),
    withL2: fc.boolean(),
    maxWaiting: fc.integer({ min: 2, max: 12 }),
  })
  .map((c) => ({
    ...c,
    // A request of maxModelLen tokens must fit in KV, and without chunking in one step's budget.
    numBlocks: Math.ceil(c.maxModelLen / c.blockSize) + c.extraBlocks,
    budget: c.chunked ? c.budget : Math.max(c.budget, c.maxModelLen),
  }));

const requestArb = fc.record({
  arriveAt: fc.integer({ min: 0, max: 30 }),
  sharedPrefix: fc.integer({ min: 0, max: 2 }),
  promptLen: fc.integer({ min: 1, max: 40 }),
  maxTokens: fc.integer({ min: 1, max: 12 }),
  priority: fc.integer({ min: 0, max: 3 }),
  abortAt: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
  program: fc.constantFrom(undefined, "p", "q"),
});

const pauseArb = fc.array(
  fc.record({ at: fc.integer({ min: 0, max: 40 }), program: fc.constantFrom("p", "q"), to: fc.constantFrom("L2" as const, "drop" as const), restoreAfter: fc.integer({ min: 1, max: 10 }) }),
  { maxLength: 3 },
);

describe("scheduler properties", () => {
  it("every request finishes exactly once within its limits; budget, maxNumSeqs and KV invariants hold", () => {
    fc.assert(
      fc.property(configArb, fc.array(requestArb, { minLength: 1, maxLength: 14 }), pauseArb, fc.integer(), (c, reqs, pauses, seed) => {
        const cfg: Partial<SchedulerConfig> = {
          maxNumBatchedTokens: c.budget,
          maxNumSeqs: c.maxNumSeqs,
          policy: c.policy,
          enableChunkedPrefill: c.chunked,
          longPrefillTokenThreshold: c.threshold,
          maxModelLen: c.maxModelLen,
          stopTokenIds: [0],
          maxWaiting: c.maxWaiting,
        };
        const l2 = c.prefix && c.withL2 ? new InProcessKvTier({ name: "L2", capacityBlocks: 8, bandwidthBytesPerMs: 1e6 }) : undefined;
        const h = makeHarness(cfg, { blockSize: c.blockSize, numBlocks: c.numBlocks, enablePrefixCaching: c.prefix, ...(l2 ? { l2 } : {}) }, seed);
        const tok = h.rng.fork("tokens");
        const prefixes = [[], [1, 2, 3, 4, 5, 6, 7, 8, 9], [11, 12, 13, 14, 15]];
        const accepted = new Map<string, { maxTokens: number; promptLen: number }>();
        const finishedCount = new Map<string, number>();
        const record = (f: FinishedRequest) => {
          finishedCount.set(f.requestId, (finishedCount.get(f.requestId) ?? 0) + 1);
          const a = accepted.get(f.requestId);
          expect(a).toBeDefined();
          if (!a) return;
          const n = f.outputTokenIds.length;
          expect(n).toBeLessThanOrEqual(a.maxTokens);
          expect(f.logprobs).toHaveLength(n);
          expect(a.promptLen + n).toBeLessThanOrEqual(c.maxModelLen);
          if (f.finishReason === "stop") expect(f.outputTokenIds.at(-1)).toBe(0);
          if (f.finishReason === "length") expect(n === a.maxTokens || a.promptLen + n === c.maxModelLen).toBe(true);
        };
        const pausedUntil = new Map<string, number>();
        let step = 0;
        for (; step < 3000; step++) {
          for (const [p, until] of pausedUntil) {
            if (step >= until) {
              h.sched.restoreProgram(p);
              pausedUntil.delete(p);
            }
          }
          for (const pz of pauses) {
            if (pz.at === step && !pausedUntil.has(pz.program)) {
              h.sched.pauseProgram(pz.program, pz.to);
              pausedUntil.set(pz.program, step + pz.restoreAfter);
            }
          }
          reqs.forEach((r, i) => {
            const id = `r${i}`;
            if (r.arriveAt === step) {
              const own = Array.from({ length: r.promptLen }, () => tok.int(1, 30));
              const prompt = [...(prefixes[r.sharedPrefix] ?? []), ...own].slice(0, c.maxModelLen - 1);
              try {
                h.sched.addRequest({ requestId: id, promptTokenIds: prompt, maxTokens: r.maxTokens, priority: r.priority, ...(r.program ? { programId: r.program } : {}) });
                accepted.set(id, { maxTokens: r.maxTokens, promptLen: prompt.length });
              } catch (e) {
                expect(e).toBeInstanceOf(CapacityError);
              }
            }
            if (r.abortAt === step && accepted.has(id)) {
              const f = h.sched.abort(id);
              if (f) {
                expect(f.finishReason).toBe("abort");
                record(f);
              }
            }
          });
          if (step > 40 && !h.sched.hasUnfinished()) break;
          // Stop tokens (0) now and then, so that all three finish reasons occur.
          const { plan, finished } = h.step(() => (tok.float() < 0.08 ? 0 : tok.int(10, 99)));
          expect(plan.numBatchedTokens).toBeLessThanOrEqual(c.budget);
          expect(plan.numBatchedTokens).toBe(plan.chunks.reduce((s, x) => s + x.numNewTokens, 0));
          expect(new Set(plan.chunks.map((x) => x.requestId)).size).toBe(plan.chunks.length);
          expect(h.sched.stats().running).toBeLessThanOrEqual(c.maxNumSeqs);
          for (const f of finished) record(f);
        }
        expect(h.sched.hasUnfinished()).toBe(false);
        h.step(); // flush the last finished list and any deferred frees
        expect([...accepted.keys()].filter((id) => finishedCount.get(id) !== 1)).toEqual([]);
        expect(h.kv.usage()).toBe(0);
        h.kv.checkInvariants();
      }),
      { numRuns: 150, seed: 20240611 },
    );
  });
});
