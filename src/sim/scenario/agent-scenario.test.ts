import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { runGatewaySim } from "../gateway-sim.js";
import { generateAgentPrograms } from "./agent-programs.js";
import { AGENT_WORKLOAD_FILES, agentScenario, agentScenarioFromDoc } from "./agent-scenario.js";
import { AGENT_SYSTEMS } from "./agent-systems.js";
import { parseAgentWorkload, type AgentWorkloadSpec } from "./agent-workload-spec.js";

/** A small workload whose contexts oversubscribe one engine's 16k KV tokens, so pausing and preemption act. */
const tiny = (over: Partial<AgentWorkloadSpec["programs"]> = {}): AgentWorkloadSpec =>
  parseAgentWorkload(
    {
      kind: "agent",
      name: "tiny",
      description: "test",
      sources: ["test"],
      cluster: { engines: 2, kvTokensPerEngine: 16_384 },
      programs: {
        count: 8,
        turns: [3, 6],
        systemPromptTokens: 500,
        taskTokens: [100, 400],
        outputTokens: [30, 120],
        toolOutputTokens: [200, 1200],
        toolLatency: { medianMs: 800, sigma: 1, maxMs: 20_000 },
        sandboxStart: { medianMs: 500, sigma: 0.5, maxMs: 5000 },
        ...over,
      },
    },
    "tiny.yaml",
  );

describe("agent workload files", () => {
  it("parses every shipped workload", () => {
    for (const f of AGENT_WORKLOAD_FILES) {
      const s = agentScenarioFromDoc(parse(readFileSync(new URL(`../workloads/${f}`, import.meta.url), "utf8")), f);
      expect(`${s.info.name}.yaml`).toBe(f);
      expect(s.info.sources.length).toBeGreaterThan(0);
      expect(s.systems).toEqual(["verl-like", "sglang-router", "thunderagent", "arbor"]);
    }
  });

  it("names the file and the field of an error", () => {
    const doc = { ...tiny(), programs: { ...tiny().programs, turns: [5, 2] } };
    expect(() => parseAgentWorkload(doc, "w.yaml")).toThrow("w.yaml: programs.turns: must be [lo, hi] with lo <= hi");
    expect(() => parseAgentWorkload({ ...tiny(), extra: 1 }, "w.yaml")).toThrow(/^w\.yaml: /);
  });
});

describe("agent scenario", () => {
  it("gives byte-identical JSON for the same seed, for every system", async () => {
    const sc = agentScenario(tiny());
    for (const system of sc.systems) {
      const a = JSON.stringify(await sc.run(system, { seed: 7, scale: 1 }));
      const b = JSON.stringify(await sc.run(system, { seed: 7, scale: 1 }));
      expect(a).toBe(b);
    }
    const other = JSON.stringify(await sc.run("verl-like", { seed: 8, scale: 1 }));
    expect(other).not.toBe(JSON.stringify(await sc.run("verl-like", { seed: 7, scale: 1 })));
  }, 120_000);

  it("tells its progress, programs ended of all, without changing the run", async () => {
    const sc = agentScenario(tiny());
    const seen: [number, number][] = [];
    const told = JSON.stringify(await sc.run("arbor", { seed: 7, scale: 1, onAdvance: (done, total) => seen.push([done, total]) }));
    expect(told).toBe(JSON.stringify(await sc.run("arbor", { seed: 7, scale: 1 })));
    const programs = JSON.parse(told).summary.programs as number;
    expect(seen).toEqual(Array.from({ length: programs }, (_, i) => [i + 1, programs]));
  });

  it("conserves calls and KV: every call completed, KV never above capacity, no program ends before it arrives", async () => {
    const spec = tiny();
    const programs = generateAgentPrograms(spec.programs, spec.programs.count, 3);
    const calls = programs.reduce((n, p) => n + p.turns.length, 0);
    for (const s of AGENT_SYSTEMS) {
      const r = await runGatewaySim(programs, {
        engines: 1,
        kvTokensPerEngine: 16_384,
        routing: s.routing,
        pausing: s.pausing,
        seed: 3,
        pauseTo: s.pauseTo,
        ...(s.l2 ? { l2TokensPerEngine: 65_536 } : {}),
      });
      expect(r.turns).toBe(calls);
      expect(r.peakKvBlocks).toBeLessThanOrEqual(r.kvBlocksPerEngine);
      expect(r.peakKvUsage).toBeGreaterThan(0.5); // the workload does press on KV
      programs.forEach((p, i) => expect(r.programEndsMs[i]).toBeGreaterThanOrEqual(p.arrivalMs));
      expect(r.gatewayPrograms).toEqual({ active: 0, terminated: programs.length });
      for (const series of Object.values(r.series.kvUsage)) for (const pt of series) expect(pt.value).toBeLessThanOrEqual(1);
      const pre = r.series.preemptions.map((p) => p.value);
      expect(pre).toEqual([...pre].sort((a, b) => a - b));
      expect(pre[pre.length - 1]).toBe(r.preemptions);
      expect(r.series.outputTokens.at(-1)?.value).toBe(r.outputTokens);
      // Every prompt token a perfect cache would compute was computed at least once.
      expect(r.promptTokensComputed).toBeGreaterThanOrEqual(r.uniquePromptTokens);
    }
  }, 120_000);

  it("fills the report's result: counts, percentiles, series", async () => {
    const sc = agentScenario(tiny());
    const r = await sc.run("arbor", { seed: 1, scale: 1 });
    const programs = generateAgentPrograms(tiny().programs, 8, 1);
    expect(r.summary.requests).toBe(programs.reduce((n, p) => n + p.turns.length, 0));
    expect(r.summary.completed + r.summary.aborted).toBe(r.summary.requests);
    expect(r.summary.aborted).toBe(0);
    expect(r.summary.programs).toBe(8);
    expect(r.completionPercentilesMs).toHaveLength(101);
    expect(r.completionPercentilesMs[100]).toBe(r.summary.makespanMs);
    expect(r.summary.tailMs).toBeCloseTo(r.summary.makespanMs - r.summary.p90Ms, 6);
    expect(Object.keys(r.series.kvUsage)).toEqual(["engine-0", "engine-1"]);
    expect(r.series.throughput.length).toBeGreaterThan(0);
    expect(r.summary.peakKvUsage).toBeLessThanOrEqual(1);
  }, 120_000);

  it("scales programs and engines together, and states the scale it ran", async () => {
    const spec = tiny({ count: 40 });
    const sc = agentScenario(spec);
    const r = await sc.run("verl-like", { seed: 1, scale: 0.1 });
    expect(r.summary.programs).toBe(4);
    expect(Object.keys(r.series.kvUsage)).toEqual(["engine-0"]);
    expect(await sc.scaleAt(0.1)).toMatchObject({ programs: 4, engines: 1, gpus: 1 });
    expect(await sc.scaleAt(1)).toEqual(sc.info.scale);
    expect(sc.info.scale).toMatchObject({ programs: 40, engines: 2 });
  }, 120_000);

  it("restarts a context from the system prompt + a summary on a reset", async () => {
    const spec = tiny({ contextReset: { everyTurns: 2, summaryTokens: [50, 100] }, turns: [5, 5] });
    const programs = generateAgentPrograms(spec.programs, 2, 1);
    const reset = programs[0]!.turns[1]!.resetPromptTokenIds!;
    expect(reset.slice(0, 500)).toEqual(programs[0]!.promptTokenIds.slice(0, 500));
    expect(reset.length).toBeGreaterThanOrEqual(550);
    expect(programs[0]!.turns[0]!.resetPromptTokenIds).toBeUndefined();
    const r = await runGatewaySim(programs, { engines: 1, kvTokensPerEngine: 65_536, routing: "least-load", seed: 1 });
    expect(r.turns).toBe(10);
    // With ample KV only partial blocks are recomputed (the prefix cache keeps whole 16-token blocks):
    // the reset's system prompt is a cache hit, its summary new.
    expect(r.recomputeTokens).toBeGreaterThanOrEqual(0);
    expect(r.recomputeTokens).toBeLessThan(16 * r.turns);
  }, 120_000);
});
