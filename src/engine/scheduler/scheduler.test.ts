// Scheduler tests in vLLM's style: a scheduler over a small KV cache, requests added, steps
// scheduled and fed fake outputs, then the plans and request states checked.

import { describe, expect, it } from "vitest";
import { CapacityError } from "../../core/errors.js";
import { InProcessKvTier } from "../kv/tier.js";
import { makeHarness, toks, type Harness } from "../../testing/scheduler-helpers.js";
import type { FinishedRequest } from "./scheduler.js";
import type { StepPlan } from "./step-plan.js";

const chunkOf = (plan: StepPlan, id: string) => plan.chunks.find((c) => c.requestId === id);

describe("chunked prefill", () => {
  it("splits a long prompt across steps within the token budget and samples only when it completes", () => {
    const h = makeHarness({ maxNumBatchedTokens: 16 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(40), maxTokens: 2 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(10, 500), maxTokens: 2 });
    const p = [h.step().plan, h.step().plan, h.step().plan, h.step().plan];
    expect(p.map((x) => x.chunks)).toEqual([
      [{ requestId: "a", numNewTokens: 16, numComputedTokens: 0, samples: false }],
      [{ requestId: "a", numNewTokens: 16, numComputedTokens: 16, samples: false }],
      [
        { requestId: "a", numNewTokens: 8, numComputedTokens: 32, samples: true },
        { requestId: "b", numNewTokens: 8, numComputedTokens: 0, samples: false },
      ],
      [
        { requestId: "a", numNewTokens: 1, numComputedTokens: 40, samples: true },
        { requestId: "b", numNewTokens: 2, numComputedTokens: 8, samples: true },
      ],
    ]);
    for (const plan of h.plans) expect(plan.numBatchedTokens).toBeLessThanOrEqual(16);
    expect(h.sched.requestState("a")?.outputTokenIds).toHaveLength(2);
  });

  it("caps each prefill chunk at longPrefillTokenThreshold", () => {
    const h = makeHarness({ maxNumBatchedTokens: 32, longPrefillTokenThreshold: 8 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(20), maxTokens: 1 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(20, 300), maxTokens: 1 });
    const sizes = [0, 1, 2].map(() => h.step().plan.chunks.map((c) => c.numNewTokens));
    expect(sizes).toEqual([
      [8, 8],
      [8, 8],
      [4, 4],
    ]);
  });

  it("without chunked prefill a prompt that does not fit the remaining budget waits", () => {
    const cfg = { maxNumBatchedTokens: 40, maxModelLen: 32 };
    const off = makeHarness({ ...cfg, enableChunkedPrefill: false });
    const on = makeHarness({ ...cfg, enableChunkedPrefill: true });
    for (const h of [off, on]) {
      h.sched.addRequest({ requestId: "a", promptTokenIds: toks(30), maxTokens: 2 });
      h.sched.addRequest({ requestId: "b", promptTokenIds: toks(30, 300), maxTokens: 2 });
    }
    expect(off.step().plan.chunks.map((c) => [c.requestId, c.numNewTokens])).toEqual([["a", 30]]);
    expect(off.step().plan.chunks.map((c) => [c.requestId, c.numNewTokens])).toEqual([
      ["a", 1],
      ["b", 30],
    ]);
    expect(on.step().plan.chunks.map((c) => [c.requestId, c.numNewTokens])).toEqual([
      ["a", 30],
      ["b", 10],
    ]);
  });
});

describe("decode batching and limits", () => {
  it("batches the decode steps of all running requests", () => {
    const h = makeHarness();
    for (const id of ["a", "b", "c", "d"]) h.sched.addRequest({ requestId: id, promptTokenIds: toks(5, id.charCodeAt(0) * 10), maxTokens: 3 });
    const s0 = h.step();
    expect(s0.plan.numBatchedTokens).toBe(20);
    expect(s0.plan.chunks.every((c) => c.samples)).toBe(true);
    const s1 = h.step();
    expect(s1.plan.chunks.map((c) => c.numNewTokens)).toEqual([1, 1, 1, 1]);
    expect(s1.plan.chunks.map((c) => c.numComputedTokens)).toEqual([5, 5, 5, 5]);
    const s2 = h.step();
    expect(s2.finished.map((f) => [f.requestId, f.finishReason, f.outputTokenIds.length])).toEqual([
      ["a", "length", 3],
      ["b", "length", 3],
      ["c", "length", 3],
      ["d", "length", 3],
    ]);
    const s3 = h.step();
    expect(s3.plan.chunks).toEqual([]);
    expect(s3.plan.finished).toEqual(["a", "b", "c", "d"]);
    expect(h.sched.hasUnfinished()).toBe(false);
    expect(h.kv.usage()).toBe(0);
  });

  it("never runs more than maxNumSeqs requests", () => {
    const h = makeHarness({ maxNumSeqs: 2 });
    for (const id of ["a", "b", "c"]) h.sched.addRequest({ requestId: id, promptTokenIds: toks(4, id.charCodeAt(0) * 10), maxTokens: 2 });
    expect(h.step().plan.chunks.map((c) => c.requestId)).toEqual(["a", "b"]);
    expect(h.sched.stats()).toMatchObject({ running: 2, waiting: 1 });
    expect(h.step().plan.chunks.map((c) => c.requestId)).toEqual(["a", "b"]);
    expect(h.step().plan.chunks.map((c) => c.requestId)).toEqual(["c"]);
  });
});

describe("preemption by recompute", () => {
  it("preempts the last running request when KV runs out and resumes it with the same output count", () => {
    // 8 blocks of 4 tokens: each request alone fits (28 tokens), both together do not.
    const h = makeHarness({ maxModelLen: 32, maxNumSeqs: 2 }, { numBlocks: 8, enablePrefixCaching: false });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(8), maxTokens: 20 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(8, 300), maxTokens: 20 });
    // c waits (maxNumSeqs); the preempted b must go back in front of it.
    h.sched.addRequest({ requestId: "c", promptTokenIds: toks(4, 500), maxTokens: 1 });
    let bResumedAt: number | undefined;
    let cStartedAt: number | undefined;
    let outputsAtPreemption: number[] | undefined;
    const finished: FinishedRequest[] = [];
    while (h.sched.hasUnfinished() && h.plans.length < 200) {
      const { plan, finished: f } = h.step();
      finished.push(...f);
      if (plan.preempted.length > 0) {
        expect(plan.preempted).toEqual(["b"]);
        expect(chunkOf(plan, "b")).toBeUndefined();
        const st = h.sched.requestState("b");
        expect(st).toMatchObject({ status: "preempted", numComputedTokens: 0, numPreemptions: 1 });
        outputsAtPreemption = st?.outputTokenIds;
        expect(h.kv.blocksOf("b")).toEqual([]);
      }
      const order = plan.chunks.map((c) => c.requestId);
      if (cStartedAt === undefined && order.includes("c")) cStartedAt = plan.stepId * 100 + order.indexOf("c");
      const resumed = chunkOf(plan, "b");
      if (outputsAtPreemption && resumed && bResumedAt === undefined) bResumedAt = plan.stepId * 100 + order.indexOf("b");
      if (outputsAtPreemption && resumed && resumed.numComputedTokens === 0) {
        // The recompute prompt is the original prompt plus the outputs so far.
        expect(resumed).toMatchObject({ numNewTokens: 8 + outputsAtPreemption.length, samples: true });
      }
    }
    expect(outputsAtPreemption).toBeDefined();
    expect(bResumedAt).toBeLessThan(cStartedAt ?? -1);
    expect(finished.map((f) => [f.requestId, f.finishReason, f.outputTokenIds.length, f.numPreemptions]).filter((x) => x[0] !== "c")).toEqual([
      ["a", "length", 20, 0],
      ["b", "length", 20, 1],
    ]);
    const b = finished.find((f) => f.requestId === "b") as FinishedRequest;
    expect(b.outputTokenIds.slice(0, outputsAtPreemption?.length)).toEqual(outputsAtPreemption);
    expect(b.logprobs).toHaveLength(20);
    // The whole sequence a continuation would pass on: the prompt, then every output token (preemption included).
    expect([...b.tokenIds]).toEqual([...toks(8, 300), ...b.outputTokenIds]);
    expect(h.sched.stats().preemptions).toBe(1);
  });

  it("FCFS preempts the failing request itself when it is the last; priority preempts max (priority, arrival)", () => {
    const run = (policy: "fcfs" | "priority") => {
      const h = makeHarness({ policy, maxModelLen: 20 }, { numBlocks: 5, enablePrefixCaching: false });
      h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 5, priority: 0, arrivalTime: 0 });
      h.sched.addRequest({ requestId: "b", promptTokenIds: toks(4, 200), maxTokens: 5, priority: 10, arrivalTime: 1 });
      h.step();
      h.sched.addRequest({ requestId: "c", promptTokenIds: toks(4, 300), maxTokens: 5, priority: 0, arrivalTime: 2 });
      expect(h.step().plan.chunks.map((c) => c.requestId)).toEqual(["a", "b", "c"]);
      return { h, plan: h.step().plan };
    };
    const fcfs = run("fcfs");
    expect(fcfs.plan.preempted).toEqual(["c"]);
    expect(fcfs.plan.chunks.map((c) => c.requestId)).toEqual(["a", "b"]);
    const prio = run("priority");
    // b was already scheduled this step: it is taken back out and its budget returned.
    expect(prio.plan.preempted).toEqual(["b"]);
    expect(prio.plan.chunks.map((c) => [c.requestId, c.numNewTokens])).toEqual([
      ["a", 1],
      ["c", 1],
    ]);
    expect(prio.plan.numBatchedTokens).toBe(2);
    expect(prio.h.sched.requestState("b")).toMatchObject({ status: "preempted", numComputedTokens: 0, outputTokenIds: expect.any(Array) });
    expect(prio.h.sched.requestState("b")?.outputTokenIds).toHaveLength(2);
    // No admission in a step that preempted; everything still completes.
    const rest = prio.h.runToEnd();
    expect(rest.map((f) => f.outputTokenIds.length)).toEqual([5, 5, 5]);
  });
});

describe("queue policy", () => {
  const order = (policy: "fcfs" | "priority") => {
    const h = makeHarness({ policy, maxNumSeqs: 1 });
    // z is added before y but arrived later; x arrived first with the worst priority.
    h.sched.addRequest({ requestId: "x", promptTokenIds: toks(4), maxTokens: 2, priority: 5, arrivalTime: 0 });
    h.sched.addRequest({ requestId: "z", promptTokenIds: toks(4, 300), maxTokens: 2, priority: 1, arrivalTime: 2 });
    h.sched.addRequest({ requestId: "y", promptTokenIds: toks(4, 200), maxTokens: 2, priority: 1, arrivalTime: 1 });
    return h.runToEnd().map((f) => f.requestId);
  };
  it("FCFS serves in insertion order", () => expect(order("fcfs")).toEqual(["x", "z", "y"]));
  it("priority serves by (priority, arrival)", () => expect(order("priority")).toEqual(["y", "z", "x"]));
});

describe("abort", () => {
  it("aborts a waiting request: it is never scheduled and appears in the next plan's finished", () => {
    const h = makeHarness({ maxNumSeqs: 1 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 3 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(4, 200), maxTokens: 3 });
    h.step();
    const f = h.sched.abort("b");
    expect(f).toMatchObject({ requestId: "b", finishReason: "abort", outputTokenIds: [] });
    expect(h.sched.abort("b")).toBeUndefined();
    expect(h.sched.abort("nope")).toBeUndefined();
    const { plan } = h.step();
    expect(plan.finished).toEqual(["b"]);
    expect(h.sched.requestState("b")).toBeUndefined();
    expect(h.runToEnd().map((x) => x.requestId)).toEqual(["a"]);
    expect(h.sched.stats()).toMatchObject({ finished: 2, aborted: 1 });
  });

  it("aborts a running request mid-step: its token is dropped and its KV freed at the next schedule", () => {
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(6), maxTokens: 5 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(6, 200), maxTokens: 5 });
    h.step();
    const plan = h.sched.schedule();
    expect(h.sched.abort("a")).toMatchObject({ finishReason: "abort", outputTokenIds: [expect.any(Number)] });
    expect(h.kv.blocksOf("a").length).toBeGreaterThan(0); // the executor may still be using it
    const sampled = plan.chunks.map(() => ({ tokenId: 42, logprob: -1 }));
    const done = h.sched.onStepDone({ stepId: plan.stepId, sampled, durationMs: 1 });
    expect(done).toEqual([]);
    const next = h.sched.schedule();
    expect(next.finished).toEqual(["a"]);
    expect(h.kv.blocksOf("a")).toEqual([]);
    h.kv.checkInvariants();
    expect(h.sched.requestState("b")?.outputTokenIds).toEqual([expect.any(Number), 42]);
  });

  it("frees a running request's KV at once when no step in flight uses it", () => {
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(6), maxTokens: 5 });
    h.step();
    expect(h.kv.blocksOf("a").length).toBe(2);
    h.sched.abort("a");
    expect(h.kv.blocksOf("a")).toEqual([]);
    expect(h.sched.hasUnfinished()).toBe(false);
  });
});

describe("prefix cache", () => {
  it("a second request sharing a prefix prefills only the uncached suffix", () => {
    const prefix = toks(16, 700);
    const run = (enablePrefixCaching: boolean) => {
      const h = makeHarness({}, { enablePrefixCaching });
      h.sched.addRequest({ requestId: "a", promptTokenIds: [...prefix, 1, 2, 3], maxTokens: 2 });
      h.runToEnd();
      h.sched.addRequest({ requestId: "b", promptTokenIds: [...prefix, 4, 5, 6], maxTokens: 2 });
      const first = h.step().plan.chunks[0];
      const fin = h.runToEnd();
      return { first, fin, kv: h.kv };
    };
    const cached = run(true);
    expect(cached.first).toEqual({ requestId: "b", numNewTokens: 3, numComputedTokens: 16, samples: true });
    expect(cached.fin[0]).toMatchObject({ requestId: "b", numCachedTokens: 16 });
    expect(cached.kv.stats().hits).toBe(16);
    const uncached = run(false);
    expect(uncached.first).toMatchObject({ numNewTokens: 19, numComputedTokens: 0 });
    expect(uncached.fin[0]).toMatchObject({ numCachedTokens: 0 });
  });
});

describe("finish reasons", () => {
  it("stops on a stop token, which is kept in the outputs, even at the max_tokens boundary", () => {
    const h = makeHarness({ stopTokenIds: [0, 7] });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 10 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(4, 200), maxTokens: 3 });
    const count = new Map<string, number>();
    const out: FinishedRequest[] = [];
    while (h.sched.hasUnfinished()) {
      out.push(
        ...h.step((id) => {
          const n = (count.get(id) ?? 0) + 1;
          count.set(id, n);
          return n === 3 ? (id === "a" ? 7 : 0) : 50 + n;
        }).finished,
      );
    }
    expect(out).toEqual([
      expect.objectContaining({ requestId: "a", finishReason: "stop", stopTokenId: 7, outputTokenIds: [51, 52, 7] }),
      expect.objectContaining({ requestId: "b", finishReason: "stop", stopTokenId: 0, outputTokenIds: [51, 52, 0] }),
    ]);
  });

  it("finishes with reason length at maxTokens or at maxModelLen", () => {
    const h = makeHarness({ maxModelLen: 14 });
    h.sched.addRequest({ requestId: "long", promptTokenIds: toks(10), maxTokens: 100 });
    h.sched.addRequest({ requestId: "short", promptTokenIds: toks(3, 200), maxTokens: 2 });
    const out = h.runToEnd();
    expect(out.map((f) => [f.requestId, f.finishReason, f.outputTokenIds.length])).toEqual([
      ["short", "length", 2],
      ["long", "length", 4],
    ]);
    expect(out.every((f) => f.stopTokenId === undefined)).toBe(true);
  });
});

describe("input checks", () => {
  it("bounds the waiting queue with CapacityError", () => {
    const h = makeHarness({ maxWaiting: 2, maxNumSeqs: 1 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 2 });
    h.sched.addRequest({ requestId: "b", promptTokenIds: toks(4), maxTokens: 2 });
    expect(() => h.sched.addRequest({ requestId: "c", promptTokenIds: toks(4), maxTokens: 2 })).toThrow(CapacityError);
    h.step(); // admits a: the queue has room again
    h.sched.addRequest({ requestId: "c", promptTokenIds: toks(4), maxTokens: 2 });
    expect(h.sched.stats().waiting).toBe(2);
  });

  it("rejects bad requests naming the field", () => {
    const h = makeHarness({ maxModelLen: 16 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 2 });
    expect(() => h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 2 })).toThrow(/already/);
    expect(() => h.sched.addRequest({ requestId: "e", promptTokenIds: [], maxTokens: 2 })).toThrow(/promptTokenIds/);
    expect(() => h.sched.addRequest({ requestId: "f", promptTokenIds: [1.5], maxTokens: 2 })).toThrow(/promptTokenIds/);
    // Tokens are kept in a Uint32Array: an id past 2^32 - 1 is refused, not stored wrapped.
    expect(() => h.sched.addRequest({ requestId: "f", promptTokenIds: [1, 2 ** 32], maxTokens: 2 })).toThrow(/promptTokenIds must be integers in \[0, 2\^32\), got 4294967296 at 1/);
    expect(() => h.sched.addRequest({ requestId: "g", promptTokenIds: toks(16), maxTokens: 2 })).toThrow(/maxModelLen/);
    expect(() => h.sched.addRequest({ requestId: "h", promptTokenIds: toks(4), maxTokens: 0 })).toThrow(/maxTokens/);
  });

  it("rejects configs that could never finish a request", () => {
    expect(() => makeHarness({ maxNumSeqs: 0 })).toThrow(/maxNumSeqs/);
    expect(() => makeHarness({ tokenMemory: "shared" as "counted" })).toThrow(/tokenMemory must be "counted" or "uncounted", got shared/);
    expect(() => makeHarness({ enableChunkedPrefill: false, maxNumBatchedTokens: 16, maxModelLen: 32 })).toThrow(/enableChunkedPrefill/);
    expect(() => makeHarness({ maxModelLen: 64 }, { numBlocks: 8 })).toThrow(/KV cache has 8/);
  });

  it("checks the step protocol", () => {
    const h = makeHarness();
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 2 });
    const plan = h.sched.schedule();
    expect(() => h.sched.schedule()).toThrow(/in flight/);
    expect(() => h.sched.onStepDone({ stepId: plan.stepId + 1, sampled: [], durationMs: 1 })).toThrow(/expected stepId/);
    expect(() => h.sched.onStepDone({ stepId: plan.stepId, sampled: [], durationMs: 1 })).toThrow(/no sampled token/);
    expect(h.sched.requestState("a")?.outputTokenIds).toEqual([]);
    h.sched.onStepDone({ stepId: plan.stepId, sampled: [{ tokenId: 11, logprob: -0.5 }], durationMs: 1 });
    expect(h.sched.requestState("a")?.outputTokenIds).toEqual([11]);
  });
});

describe("determinism", () => {
  const workload = (seed: number) => {
    const h = makeHarness({ policy: seed % 2 ? "priority" : "fcfs", maxNumBatchedTokens: 24, maxModelLen: 48 }, { numBlocks: 16 }, seed);
    const wl = h.rng.fork("workload");
    const shared = toks(12, 900);
    let n = 0;
    for (let step = 0; step < 400 && (n < 14 || h.sched.hasUnfinished()); step++) {
      if (n < 14 && wl.float() < 0.5) {
        const own = toks(wl.int(1, 20), wl.int(0, 5000));
        h.sched.addRequest({
          requestId: `r${n++}`,
          promptTokenIds: wl.float() < 0.5 ? [...shared, ...own] : own,
          maxTokens: wl.int(1, 16),
          priority: wl.int(0, 2),
        });
      }
      h.step();
    }
    expect(h.sched.hasUnfinished()).toBe(false);
    return { json: JSON.stringify(h.plans), preemptions: h.sched.stats().preemptions };
  };

  it("the same workload under the same seed gives the same plans", () => {
    const a = workload(7);
    const b = workload(7);
    expect(a.json).toBe(b.json);
    expect(a.preemptions).toBeGreaterThan(0); // the schedule exercised preemption
    expect(workload(8).json).not.toBe(a.json);
  });
});

describe("program pause and restore", () => {
  const l2 = () => new InProcessKvTier({ name: "L2", capacityBlocks: 64, bandwidthBytesPerMs: 1e6 });

  it("offloads a paused program's KV to L2, holds its next request, and loads the prefix back on restore", () => {
    const h = makeHarness({ maxModelLen: 64 }, { numBlocks: 16, l2: l2() });
    h.sched.addRequest({ requestId: "p1", programId: "p", promptTokenIds: toks(16, 700), maxTokens: 4 });
    const [p1] = h.runToEnd();
    h.sched.pauseProgram("p", "L2");
    expect(h.sched.programPause("p")).toBe("L2");
    // The second turn: the whole first conversation plus a new user message.
    const turn2 = [...toks(16, 700), ...(p1?.outputTokenIds ?? []), 1, 2, 3];
    h.sched.addRequest({ requestId: "p2", programId: "p", promptTokenIds: turn2, maxTokens: 2 });
    const paused = h.step().plan;
    expect(paused.transfers).toContainEqual({ from: "L1", to: "L2", blocks: 4, bytes: 4 * 4 * 2 });
    expect(paused.chunks).toEqual([]);
    expect(h.sched.requestState("p2")?.held).toBe(true);
    expect(h.sched.stats()).toMatchObject({ held: 1, pausedPrograms: 1 });
    // Another request takes the L1 blocks the pause freed (they are evicted first).
    h.sched.addRequest({ requestId: "q", promptTokenIds: toks(60, 3000), maxTokens: 1 });
    let qDone = false;
    for (let i = 0; i < 20 && !qDone; i++) qDone = h.step().finished.some((f) => f.requestId === "q");
    expect(qDone).toBe(true);
    expect(h.sched.requestState("p2")).toMatchObject({ status: "waiting", held: true });
    h.sched.restoreProgram("p");
    const restored = h.step().plan;
    expect(restored.transfers).toContainEqual({ from: "L2", to: "L1", blocks: 4, bytes: 32 });
    expect(restored.chunks[0]).toMatchObject({ requestId: "p2", numComputedTokens: 16, numNewTokens: turn2.length - 16 });
  });

  it("offloads a running request of a paused program when it finishes; drop offloads nothing", () => {
    for (const to of ["L3", "drop"] as const) {
      const l3 = new InProcessKvTier({ name: "L3", capacityBlocks: 64, bandwidthBytesPerMs: 1e6 });
      const h = makeHarness({}, { l3 });
      h.sched.addRequest({ requestId: "p1", programId: "p", promptTokenIds: toks(12, 700), maxTokens: 3 });
      h.step();
      h.sched.pauseProgram("p", to); // p1 keeps running
      const fin = [...h.step().finished, ...h.step().finished];
      expect(fin.map((f) => [f.requestId, f.programId])).toEqual([["p1", "p"]]);
      expect(h.kv.blocksOf("p1")).toEqual([]);
      const next = h.step().plan;
      expect(next.finished).toEqual(["p1"]);
      if (to === "L3") expect(next.transfers).toEqual([{ from: "L1", to: "L3", blocks: 3, bytes: 24 }]);
      else expect(next.transfers).toEqual([]);
      expect(l3.size()).toBe(to === "L3" ? 3 : 0);
      h.sched.endProgram("p");
      expect(h.sched.programPause("p")).toBeUndefined();
    }
  });
});

describe("bounded program state (an engine behind a gateway is never told that a program ended)", () => {
  const l2 = () => new InProcessKvTier({ name: "L2", capacityBlocks: 64, bandwidthBytesPerMs: 1e6 });

  it("keeps programs' last tokens up to maxProgramTailTokens: a program finished before the bound's worth of others pauses without a move", () => {
    const h = makeHarness({ maxModelLen: 64, maxProgramTailTokens: 40 }, { l2: l2() });
    for (const [k, pid] of ["a", "b", "c"].entries()) {
      h.sched.addRequest({ requestId: `${pid}1`, programId: pid, promptTokenIds: toks(16, 700 + 100 * k), maxTokens: 4 });
      h.runToEnd();
    }
    // 20 tokens each: c's tail pushed a's out (60 > 40); a's blocks are still cached in L1.
    h.sched.pauseProgram("a", "L2");
    expect(h.step().plan.transfers).toEqual([]);
    h.sched.pauseProgram("c", "L2");
    expect(h.step().plan.transfers).toContainEqual({ from: "L1", to: "L2", blocks: 4, bytes: 32 });
    expect(() => makeHarness({ maxProgramTailTokens: -1 })).toThrow("maxProgramTailTokens must be an integer >= 0");
  });

  it("refuses a pause beyond maxPausedPrograms with a capacity error; re-pausing and restoring make room as expected", () => {
    const h = makeHarness({ maxPausedPrograms: 2 });
    h.sched.pauseProgram("a", "drop");
    h.sched.pauseProgram("b", "drop");
    h.sched.pauseProgram("b", "drop");
    expect(() => h.sched.pauseProgram("c", "drop")).toThrow(CapacityError);
    expect(() => h.sched.pauseProgram("c", "drop")).toThrow("the engine's paused programs (scheduler maxPausedPrograms) is full (limit 2)");
    h.sched.restoreProgram("a");
    h.sched.pauseProgram("c", "drop");
    expect(h.sched.stats().pausedPrograms).toBe(2);
  });
});

describe("recordLogprobs", () => {
  it("off, finished requests carry the same tokens and no logprobs", () => {
    const run = (recordLogprobs: boolean | undefined): FinishedRequest[] => {
      const h = makeHarness({ maxNumBatchedTokens: 16, ...(recordLogprobs === undefined ? {} : { recordLogprobs }) });
      h.sched.addRequest({ requestId: "a", promptTokenIds: toks(20), maxTokens: 5 });
      h.sched.addRequest({ requestId: "b", promptTokenIds: toks(7, 300), maxTokens: 3 });
      return h.runToEnd();
    };
    const on = run(undefined);
    const off = run(false);
    expect(on.map((f) => f.logprobs.length)).toEqual([3, 5]);
    expect(off.map((f) => [f.requestId, f.outputTokenIds, f.logprobs])).toEqual(on.map((f) => [f.requestId, f.outputTokenIds, []]));
  });
});

describe("request tokens", () => {
  /** Steps `h` until its one request finishes, and returns it. */
  const finishOne = (h: Harness): FinishedRequest => {
    const finished: FinishedRequest[] = [];
    while (h.sched.hasUnfinished() && h.plans.length < 100) finished.push(...h.step().finished);
    return finished[0] as FinishedRequest;
  };
  const run = (prompt: readonly number[] | Uint32Array, handOverPrompt: boolean): FinishedRequest => {
    const h = makeHarness({ maxNumBatchedTokens: 128, maxModelLen: 128 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: prompt, maxTokens: 20, handOverPrompt });
    return finishOne(h);
  };

  it("copies the prompt (with room to grow): the caller's array is neither changed nor read again", () => {
    const h = makeHarness({ maxNumBatchedTokens: 128, maxModelLen: 128 });
    const prompt = toks(40);
    const original = prompt.slice();
    h.sched.addRequest({ requestId: "a", promptTokenIds: prompt, maxTokens: 30 });
    prompt.fill(7);
    prompt.push(1, 2, 3);
    const a = finishOne(h);
    expect(a.outputTokenIds).toHaveLength(30);
    expect([...a.tokenIds]).toEqual([...original, ...a.outputTokenIds]);
    expect(a.tokenIds).toHaveLength(70);
  });

  it("appends to a handed-over prompt's buffer (handOverPrompt) when it has room, and gives the same tokens", () => {
    const first = run(toks(20), false);
    expect(first.tokenIds).toHaveLength(40);
    // Buffers hold a power of two of tokens: 64 here, room for the next 20.
    expect(first.tokenIds.buffer.byteLength).toBe(64 * 4);
    const a = run(first.tokenIds, true);
    expect(a.tokenIds.buffer).toBe(first.tokenIds.buffer);
    expect([...a.tokenIds]).toEqual([...first.tokenIds, ...a.outputTokenIds]);
    // The handed-over view still reads its own tokens; the same output as a copied prompt gives.
    expect(first.tokenIds).toHaveLength(40);
    expect(a.outputTokenIds).toEqual(run([...first.tokenIds], false).outputTokenIds);
    // Without room for 20 more (60 of 64 held), a handed-over prompt is copied; so is one not handed over.
    const context = [...a.tokenIds];
    const b = run(a.tokenIds, true);
    expect(b.tokenIds.buffer).not.toBe(a.tokenIds.buffer);
    expect([...b.tokenIds]).toEqual([...context, ...b.outputTokenIds]);
    const c = run(first.tokenIds.subarray(0, 20), false);
    expect(c.tokenIds.buffer).not.toBe(first.tokenIds.buffer);
    expect([...c.tokenIds.subarray(0, 20)]).toEqual(toks(20));
  });

  it("keeps tokens in uncounted memory (SharedArrayBuffers) when configured so, with the same outputs", () => {
    const h = makeHarness({ maxNumBatchedTokens: 128, maxModelLen: 128, tokenMemory: "uncounted" });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(40), maxTokens: 20 });
    const a = finishOne(h);
    expect(a.tokenIds.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(a.outputTokenIds).toEqual(run(toks(40), false).outputTokenIds);
    expect(run(toks(40), false).tokenIds.buffer).toBeInstanceOf(ArrayBuffer);
  });

  it("refuses a sampled token id outside [0, 2^32) before changing anything", () => {
    const h = makeHarness({ maxNumBatchedTokens: 128, maxModelLen: 128 });
    h.sched.addRequest({ requestId: "a", promptTokenIds: toks(4), maxTokens: 3 });
    const plan = h.sched.schedule();
    expect(() => h.sched.onStepDone({ stepId: plan.stepId, sampled: [{ tokenId: -1, logprob: 0 }], durationMs: 0 })).toThrow(/sampled token -1 for request a: token ids are integers in \[0, 2\^32\)/);
    expect(h.sched.requestState("a")?.outputTokenIds).toEqual([]);
    h.sched.onStepDone({ stepId: plan.stepId, sampled: [{ tokenId: 9, logprob: 0 }], durationMs: 0 });
    expect(h.sched.requestState("a")?.outputTokenIds).toEqual([9]);
  });
});
