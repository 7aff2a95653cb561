import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import type { ScheduledChunk, StepPlan } from "../scheduler/step-plan.js";
import { CostModelExecutor } from "./costmodel-executor.js";
import { LLAMA3_8B_H100 } from "./profile.js";
import { stepTimeMs } from "./step-time.js";

const VOCAB = 1000;
const STOPS = [2, 7];
const exec = (seed: number, stopTokenIds = STOPS, vocabSize = VOCAB): CostModelExecutor =>
  new CostModelExecutor(LLAMA3_8B_H100, new Rng(seed), { vocabSize, stopTokenIds });

function step(stepId: number, chunks: ScheduledChunk[], finished: string[] = []): StepPlan {
  return {
    stepId,
    now: 0,
    chunks,
    numBatchedTokens: chunks.reduce((s, c) => s + c.numNewTokens, 0),
    preempted: [],
    finished,
    transfers: [],
  };
}

/** Prefill of `prompt` tokens for every id, then `steps - 1` decode steps; returns each id's tokens. */
function generate(e: CostModelExecutor, ids: string[], prompt: number, steps: number) {
  const out = new Map<string, { tokenId: number; logprob: number }[]>(ids.map((id) => [id, []]));
  const durations: number[] = [];
  for (let s = 0; s < steps; s++) {
    const chunks = ids.map((requestId) => ({
      requestId,
      numNewTokens: s === 0 ? prompt : 1,
      numComputedTokens: s === 0 ? 0 : prompt + s - 1,
      samples: true,
    }));
    const plan = step(s, chunks);
    const r = e.run(plan);
    expect(r.stepId).toBe(s);
    expect(r.durationMs).toBe(stepTimeMs(LLAMA3_8B_H100, plan));
    durations.push(r.durationMs);
    ids.forEach((id, k) => out.get(id)?.push(r.sampled[k] as { tokenId: number; logprob: number }));
  }
  return { out, durations };
}

describe("CostModelExecutor", () => {
  it("is deterministic for a seed and differs across seeds", () => {
    const a = generate(exec(42), ["x", "y"], 16, 30);
    const b = generate(exec(42), ["x", "y"], 16, 30);
    const c = generate(exec(43), ["x", "y"], 16, 30);
    expect(b).toEqual(a);
    expect(c.out.get("x")).not.toEqual(a.out.get("x"));
  });

  it("gives a request the same tokens whatever it is batched with", () => {
    const alone = generate(exec(7), ["x"], 8, 20).out.get("x");
    const batched = generate(exec(7), ["w", "x", "z"], 8, 20).out.get("x");
    expect(batched).toEqual(alone);
  });

  it("samples the stop token exactly at the annotated length and never before", () => {
    for (const n of [1, 2, 5, 40]) {
      const e = exec(n);
      e.setOutputLength("x", n);
      const toks = generate(e, ["x"], 4, n).out.get("x") ?? [];
      expect(toks).toHaveLength(n);
      toks.slice(0, -1).forEach((t) => expect(STOPS).not.toContain(t.tokenId));
      expect(STOPS).toContain(toks[n - 1]?.tokenId);
    }
  });

  it("never samples a stop token without an annotation; ids in range, logprobs <= 0", () => {
    const toks = generate(exec(3), ["x", "y"], 4, 200).out;
    for (const list of toks.values()) {
      for (const t of list) {
        expect(STOPS).not.toContain(t.tokenId);
        expect(Number.isInteger(t.tokenId) && t.tokenId >= 0 && t.tokenId < VOCAB).toBe(true);
        expect(t.logprob).toBeLessThanOrEqual(0);
        expect(Number.isFinite(t.logprob)).toBe(true);
      }
    }
  });

  it("without logprobs reports 0 for each and samples the same tokens", () => {
    const withLogprobs = generate(exec(7), ["x", "y"], 4, 50).out;
    const without = generate(new CostModelExecutor(LLAMA3_8B_H100, new Rng(7), { vocabSize: VOCAB, stopTokenIds: STOPS, logprobs: false }), ["x", "y"], 4, 50).out;
    for (const id of ["x", "y"]) {
      const a = withLogprobs.get(id) ?? [];
      expect(a.some((t) => t.logprob < 0)).toBe(true);
      expect(without.get(id)).toEqual(a.map((t) => ({ tokenId: t.tokenId, logprob: 0 })));
    }
  });

  it("skips stop ids correctly in a tiny vocabulary and reaches every other id", () => {
    const toks = generate(exec(5, [0, 2], 4), ["x"], 1, 200).out.get("x") ?? [];
    expect(new Set(toks.map((t) => t.tokenId))).toEqual(new Set([1, 3]));
  });

  it("samples only for chunks with samples: true and keeps the count across a preemption", () => {
    const e = exec(9);
    e.setOutputLength("x", 3);
    const mid = e.run(step(0, [{ requestId: "x", numNewTokens: 8, numComputedTokens: 0, samples: false }]));
    expect(mid.sampled).toEqual([undefined]);
    e.run(step(1, [{ requestId: "x", numNewTokens: 8, numComputedTokens: 8, samples: true }])); // token 1
    e.run(step(2, [{ requestId: "x", numNewTokens: 1, numComputedTokens: 16, samples: true }])); // token 2
    // preempted, then recomputed from scratch: the next sampled token is the third, a stop token
    const r = e.run(step(3, [{ requestId: "x", numNewTokens: 18, numComputedTokens: 0, samples: true }]));
    expect(STOPS).toContain(r.sampled[0]?.tokenId);
  });

  it("forgets finished requests", () => {
    const e = exec(1);
    e.setOutputLength("x", 4);
    e.run(step(0, [{ requestId: "x", numNewTokens: 3, numComputedTokens: 0, samples: true }]));
    expect(e.trackedRequests).toBe(1);
    e.run(step(1, [], ["x"]));
    expect(e.trackedRequests).toBe(0);
  });

  it("follows each request's own stream as chunks change places, and starts an id finished and added again anew", () => {
    const ids = ["a", "b", "c"];
    const alone = new Map(ids.map((id) => [id, (generate(exec(11), [id], 4, 6).out.get(id) ?? []).map((t) => t.tokenId)]));
    const e = exec(11);
    const got = new Map<string, number[]>(ids.map((id) => [id, []]));
    // Six steps with the requests in changing orders and subsets (a chunk's slot is looked up by its position first).
    const orders = [["a", "b", "c"], ["c", "a", "b"], ["b", "c"], ["a", "c", "b"], ["a", "b"], ["c", "b", "a"], ["a", "c"]];
    const done = new Map<string, number>(ids.map((id) => [id, 0]));
    orders.forEach((order, s) => {
      const live = order.filter((id) => (done.get(id) ?? 0) < 6);
      const r = e.run(step(s, live.map((requestId) => ({ requestId, numNewTokens: 1, numComputedTokens: 4, samples: true }))));
      live.forEach((id, k) => {
        got.get(id)?.push(r.sampled[k]?.tokenId as number);
        done.set(id, (done.get(id) ?? 0) + 1);
      });
    });
    for (const id of ids) expect(got.get(id)).toEqual(alone.get(id)?.slice(0, done.get(id)));
    // "a" finishes; added again under the same id at the same position, it is a new request: its stream from the start.
    e.run(step(10, [], ["a"]));
    const again = e.run(step(11, [{ requestId: "a", numNewTokens: 4, numComputedTokens: 0, samples: true }]));
    expect(again.sampled[0]?.tokenId).toBe(alone.get("a")?.[0]);
    expect(() => e.run(step(12, ["a", "a"].map((requestId) => ({ requestId, numNewTokens: 1, numComputedTokens: 4, samples: true }))))).toThrow(/a is scheduled twice/);
  });

  it("rejects bad options and inputs with a clear error", () => {
    expect(() => exec(1, [1000])).toThrow(/stop token id 1000/);
    expect(() => exec(1, [], 0)).toThrow(/vocabSize/);
    expect(() => exec(1, [0, 1], 2)).toThrow(/every token id/);
    expect(() => exec(1).setOutputLength("x", 0)).toThrow(/output length of x must be an integer in 1..2147483647 \(got 0\)/);
    expect(() => exec(1).setOutputLength("x", 2 ** 31)).toThrow(/output length of x must be an integer in 1..2147483647/);
    expect(() => exec(1, []).setOutputLength("x", 3)).toThrow(/stopTokenIds is empty/);
    const dup = { requestId: "x", numNewTokens: 2, numComputedTokens: 0, samples: true };
    expect(() => exec(1).run(step(0, [dup, dup]))).toThrow(/scheduled twice/);
    expect(
      () => new CostModelExecutor({ ...LLAMA3_8B_H100, decodeBaseMs: -1 }, new Rng(1), { vocabSize: 10, stopTokenIds: [] }),
    ).toThrow(/decodeBaseMs/);
  });
});
