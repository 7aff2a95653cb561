import { describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { Vocab } from "../../model/vocab.js";
import type { GenerateResult } from "../executor.js";
import { ExecutorSlot } from "./executor-slot.js";
import { gatedExecutor, step, until, type GatedExecutorOptions } from "../../testing/engine-http-helpers.js";

const vocab = new Vocab();

function setup(aOpts: GatedExecutorOptions = {}) {
  const a = gatedExecutor("a", aOpts);
  const b = gatedExecutor("b");
  const slot = new ExecutorSlot({
    executor: a,
    policyVersion: 1,
    modelPath: "/a.gguf",
    owned: false,
    load: async (path) => {
      if (path !== "/b.gguf") throw new Error(`no such file ${path}`);
      return b;
    },
  });
  return { a, b, slot };
}

const request = (maxTokens: number) => ({ promptTokenIds: [vocab.bosId], maxTokens, temperature: 1, topP: 1, topLogprobs: 0, rng: new Rng(1) });

describe("ExecutorSlot with in_flight resume", () => {
  it("moves a request that is not generating yet straight to the new version", async () => {
    const { a, b, slot } = setup();
    const lease = slot.acquire();
    expect(lease.policyVersion).toBe(1);
    const res = await slot.loadWeights("/b.gguf", 2, "resume");
    expect(res.in_flight_requests).toBe(1);
    expect(lease.policyVersion).toBe(2);
    const done = lease.executor.generate({ ...request(2), signal: lease.signal });
    await until(() => b.running === 1);
    await step(b);
    await step(b);
    const out = await done;
    expect(out.tokens.map((t) => vocab.decode([t.id])).join("")).toBe("bb");
    expect(lease.tokenPolicyVersions(2)).toEqual([2, 2]);
    expect(a.requests).toHaveLength(0);
    lease.release();
    expect(slot.inFlight).toBe(0);
    await slot.close();
  });

  it("sleep waits for a request resuming from the retiring version before closing the new one", async () => {
    // The switch lands mid-step: the request leaves the old version only after sleep has begun.
    const { a, b, slot } = setup({ slowAbort: true });
    const lease = slot.acquire();
    let result: GenerateResult | undefined;
    const done = lease.executor.generate({ ...request(3), signal: lease.signal }).then((r) => (result = r));
    await until(() => a.running === 1);
    await step(a);
    await slot.loadWeights("/b.gguf", 2, "resume");
    let asleep = false;
    const sleeping = slot.sleep(1).then(() => (asleep = true));
    await new Promise((r) => setImmediate(r));
    expect(b.running).toBe(0);
    a.tick();
    await until(() => b.running === 1);
    await step(b);
    expect(asleep).toBe(false);
    expect(b.closed).toBe(false);
    await step(b);
    await done;
    expect(result?.finishReason).toBe("length");
    expect(lease.tokenPolicyVersions(3)).toEqual([1, 2, 2]);
    lease.release();
    await sleeping;
    expect(b.closed).toBe(true);
    await slot.close();
  });
});

describe("ExecutorSlot with in_flight finish", () => {
  it("keeps at most maxRetiringVersions old versions: at a switch beyond it, the oldest one's requests are aborted and it closes", async () => {
    const loaded = new Map<string, ReturnType<typeof gatedExecutor>>();
    const v1 = gatedExecutor("a");
    const slot = new ExecutorSlot({
      executor: v1,
      policyVersion: 1,
      modelPath: "/v1.gguf",
      owned: true,
      maxRetiringVersions: 2,
      load: async (path) => {
        const ex = gatedExecutor("b");
        loaded.set(path, ex);
        return ex;
      },
    });
    // A request in flight on each version, none finishing: versions 1, 2 and 3 retire in turn.
    const leases = [slot.acquire()];
    for (const v of [2, 3]) {
      await slot.loadWeights(`/v${v}.gguf`, v, "finish");
      leases.push(slot.acquire());
    }
    expect(leases.map((l) => [l.policyVersion, l.signal.aborted])).toEqual([[1, false], [2, false], [3, false]]);
    await slot.loadWeights("/v4.gguf", 4, "finish");
    // Three old versions now: the oldest's request is aborted by the switch, the others finish on theirs.
    expect(leases.map((l) => [l.signal.aborted, l.abortedBySwitch])).toEqual([[true, true], [false, false], [false, false]]);
    leases[0]!.release();
    await until(() => v1.closed);
    expect(loaded.get("/v2.gguf")!.closed).toBe(false);
    for (const l of leases) l.release();
    await slot.close();
  });
});

describe("ExecutorSlot counters", () => {
  it("sum every executor it served: a weight switch and a sleep lose none of their counts", async () => {
    /** A fresh executor whose counters are `c` (mutable), as a scheduled one reports them. */
    const counted = (letter: string, c: { q: number; h: number; p: number }, drafts?: number) => {
      const ex = gatedExecutor(letter);
      const base = ex.stats.bind(ex);
      ex.stats = () => ({ ...base(), prefixCacheQueries: c.q, prefixCacheHits: c.h, preemptions: c.p, ...(drafts !== undefined ? { specDecode: { numDrafts: drafts, numDraftTokens: 2 * drafts, numAcceptedTokens: drafts } } : {}) });
      return ex;
    };
    const ca = { q: 100, h: 60, p: 1 };
    const loaded: { q: number; h: number; p: number }[] = [];
    const slot = new ExecutorSlot({
      executor: counted("a", ca),
      policyVersion: 1,
      modelPath: "/a.gguf",
      owned: false,
      load: async () => {
        const c = { q: 0, h: 0, p: 0 };
        loaded.push(c);
        return counted("b", c, 3);
      },
    });
    expect(slot.counters()).toEqual({ prefixCacheQueries: 100, prefixCacheHits: 60, preemptions: 1 });
    await slot.loadWeights("/b.gguf", 2, "finish");
    // The old executor drained at once; the new one starts at zero.
    await until(() => loaded.length === 1);
    Object.assign(loaded[0]!, { q: 40, h: 30, p: 2 });
    expect(slot.counters()).toEqual({ prefixCacheQueries: 140, prefixCacheHits: 90, preemptions: 3, specDecode: { numDrafts: 3, numDraftTokens: 6, numAcceptedTokens: 3 } });
    // The first executor's counts stay after it is gone, even if it went on counting elsewhere.
    ca.q = 9999;
    await slot.sleep(1);
    expect(slot.counters()).toEqual({ prefixCacheQueries: 140, prefixCacheHits: 90, preemptions: 3, specDecode: { numDrafts: 3, numDraftTokens: 6, numAcceptedTokens: 3 } });
    await slot.wakeUp();
    Object.assign(loaded[1]!, { q: 10, h: 10, p: 0 });
    expect(slot.counters()).toEqual({ prefixCacheQueries: 150, prefixCacheHits: 100, preemptions: 3, specDecode: { numDrafts: 6, numDraftTokens: 12, numAcceptedTokens: 6 } });
    await slot.close();
  });
});
