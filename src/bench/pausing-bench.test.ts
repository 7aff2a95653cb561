import { describe, expect, it } from "vitest";
import { runGatewaySim } from "../sim/gateway-sim.js";
import { generateThunderWorkload } from "../sim/thunder-workload.js";
import { PAUSING_BENCH_ROUTERS, pausingScenarios, thunderWorkloadOptions } from "./pausing-bench.js";
import { getBenchmark } from "./registry.js";

describe("arbor bench pausing (quick)", () => {
  it("has every router × pausing row in both tables, deterministically", async () => {
    const run = () => getBenchmark("pausing").run({ quick: true, log: () => {} });
    const tables = await run();
    expect(tables).toHaveLength(2);
    const expected = PAUSING_BENCH_ROUTERS.flatMap((r) => [
      [r, "off"],
      [r, "on"],
    ]);
    for (const t of tables) {
      expect(t.rows.map((r) => [r[0], r[1]])).toEqual(expected);
      const col = (name: string) => t.columns.indexOf(name);
      for (const r of t.rows) {
        expect(r[col("steps/min")]).toBeGreaterThan(0);
        expect(r[col("makespan (s)")]).toBeGreaterThan(0);
      }
      // Baseline row: every ratio is 1.
      expect(t.rows[0]![col("steps/min ×")]).toBe(1);
    }
    // Oversubscribed: the controller does pause; ample KV: it never pauses.
    const pauses = (i: number) => tables[i]!.rows.map((r) => r[tables[i]!.columns.indexOf("pauses")] as number);
    expect(Math.max(...pauses(0))).toBeGreaterThan(0);
    expect(Math.max(...pauses(1))).toBe(0);
    expect(await run()).toEqual(tables);
  }, 180_000);

  it("finishes every program and turn with pausing off and on; recompute is counted, not negative", async () => {
    const [tight] = pausingScenarios(true);
    const programs = generateThunderWorkload({ ...thunderWorkloadOptions(true), programs: 10 });
    const turns = programs.reduce((s, p) => s + p.turns.length, 0);
    for (const pausing of [false, true]) {
      const r = await runGatewaySim(programs, { engines: 2, kvTokensPerEngine: tight!.kvTokensPerEngine, routing: "least-load", pausing, seed: 1 });
      expect(r.programs).toBe(10);
      expect(r.turns).toBe(turns);
      expect(r.recomputeTokens).toBeGreaterThanOrEqual(0);
      expect(r.promptTokensComputed).toBeGreaterThanOrEqual(r.uniquePromptTokens);
      expect(r.meanKvUsage).toHaveLength(2);
      if (!pausing) expect(r.pauses).toBe(0);
    }
  });

  it("a single engine with ample KV recomputes almost nothing (only partial blocks)", async () => {
    const programs = generateThunderWorkload({ ...thunderWorkloadOptions(true), programs: 4 });
    const r = await runGatewaySim(programs, { engines: 1, kvTokensPerEngine: 200_000, routing: "least-load", seed: 1 });
    expect(r.preemptions).toBe(0);
    expect(r.kvImbalance).toBe(0);
    // Sticky by construction: only block-boundary tails of each turn's prompt are recomputed.
    expect(r.recomputeTokens).toBeLessThan(r.turns * 16);
  });

  it("rejects bad options with the field named", async () => {
    const programs = generateThunderWorkload({ ...thunderWorkloadOptions(true), programs: 2 });
    await expect(runGatewaySim(programs, { engines: 0, kvTokensPerEngine: 10_000, routing: "least-load", seed: 1 })).rejects.toThrow(/engines must be/);
    await expect(runGatewaySim(programs, { engines: 1, kvTokensPerEngine: 10_000, routing: "nope", seed: 1 })).rejects.toThrow(/unknown preset 'nope'/);
    expect(() => generateThunderWorkload({ ...thunderWorkloadOptions(true), turns: [3, 2] })).toThrow(/turns must be/);
  });
});
