import { describe, expect, it } from "vitest";
import { getBenchmark } from "./registry.js";
import { sandboxBenchOptions, sandboxTable, taskRepo, type StartRun } from "./sandbox-bench.js";

describe("arbor bench sandbox (quick)", () => {
  it("prints no-pool and warm-pool rows side by side with ratios, on real sandboxes", async () => {
    const lines: string[] = [];
    const tables = await getBenchmark("sandbox").run({ quick: true, log: (l) => lines.push(l) });
    expect(tables).toHaveLength(1);
    const t = tables[0]!;
    const o = sandboxBenchOptions(true);
    expect(t.columns).toEqual(["mode", "programs", "warm size", "p50 (ms)", "p99 (ms)", "mean (ms)", "total (s)", "makespan (s)", "prepared hits", "misses", "p50 ×", "p99 ×", "total ×"]);
    expect(t.rows.map((r) => [r[0], r[1], r[2]])).toEqual([
      ["no pool", o.programs, 0],
      ["warm pool", o.programs, o.warmSize],
    ]);
    const col = (name: string) => t.columns.indexOf(name);
    for (const r of t.rows) {
      expect(r[col("p50 (ms)")]).toBeGreaterThan(0);
      expect(r[col("p99 (ms)")]).toBeGreaterThanOrEqual(r[col("p50 (ms)")] as number);
      expect((r[col("prepared hits")] as number) + (r[col("misses")] as number)).toBe(o.programs);
    }
    expect(t.rows[0]![col("misses")]).toBe(o.programs);
    expect(t.rows[0]![col("p50 ×")]).toBe(1);
    // The pool prepared ahead for at least the first programs (they arrive after a full interval).
    expect(t.rows[1]![col("prepared hits")]).toBeGreaterThan(0);
    expect(lines).toHaveLength(2);
  }, 60_000);

  it("builds the table from given runs (ratios are no-pool / row) and a deterministic task repo", () => {
    const o = sandboxBenchOptions(true);
    const runs: StartRun[] = [
      { mode: "no pool", latenciesMs: [100, 200, 300], makespanMs: 1000, hits: 0, misses: 3 },
      { mode: "warm pool", latenciesMs: [10, 20, 100], makespanMs: 900, hits: 3, misses: 0 },
    ];
    const t = sandboxTable(o, runs);
    const row = t.rows[1]!;
    expect(row[t.columns.indexOf("p50 (ms)")]).toBe(20);
    expect(row[t.columns.indexOf("p99 (ms)")]).toBe(100);
    expect(row[t.columns.indexOf("p50 ×")]).toBe(10);
    expect(row[t.columns.indexOf("total ×")]).toBe(600 / 130);
    expect(taskRepo(o)).toEqual(taskRepo(o));
    expect(taskRepo(o).size).toBe(o.repoFiles + 1);
  });
});
