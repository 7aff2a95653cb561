import { describe, expect, it } from "vitest";
import { agentWorkloadOptions, runAgentWorkloadOnce } from "../bench/prefix-cache-bench.js";
import { generateAgentWorkload } from "./agent-workload.js";

const small = { ...agentWorkloadOptions(true), programs: 6, turns: 3 };

describe("agent workload on the simulated engine", () => {
  it("is deterministic for a seed and differs across seeds", () => {
    expect(generateAgentWorkload(small)).toEqual(generateAgentWorkload(small));
    expect(generateAgentWorkload({ ...small, seed: 18 })).not.toEqual(generateAgentWorkload(small));
    expect(runAgentWorkloadOnce(small, true)).toEqual(runAgentWorkloadOnce(small, true));
  });

  it("each turn's prompt extends the previous turn's context, so caching hits grow with turns", () => {
    const on = runAgentWorkloadOnce(small, true);
    const off = runAgentWorkloadOnce(small, false);
    expect(off.hitRate).toBe(0);
    expect(off.promptTokensComputed).toBe(off.promptTokens); // no KV pressure: no recompute
    expect(on.promptTokensComputed).toBeLessThan(off.promptTokensComputed);
    expect(on.makespanMs).toBeLessThan(off.makespanMs);
  });

  it("counts preemption recompute when KV is tight", () => {
    const tight = runAgentWorkloadOnce({ ...small, programs: 8 }, false, 12_000);
    expect(tight.preemptions).toBeGreaterThan(0);
    expect(tight.promptTokensComputed).toBeGreaterThan(tight.promptTokens);
  });
});
