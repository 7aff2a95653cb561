// The reproduction table from reports: each figure computed from the right systems, targets judged, a missed
// target without an attribution flagged, and the text deterministic.
import { describe, expect, it } from "vitest";
import type { SimReport } from "../sim/scenario/sim-report.js";
import { simReportFixture as report, simResultFixture as result } from "../testing/sim-report-fixture.js";
import { meanReport, REPRODUCTION_PLAN, REPRODUCTION_ROWS, reproductionMarkdown, tailChange, targetLine, targetRows, unattributedRows } from "./reproduction.js";

describe("reproduction table", () => {
  /** seer-moonlight with seer at `seerMs` against verl-like's 2,000 ms (tail 500 → 100 ms), oracle and arbor at 900 ms. */
  const moonlight = (seed: number, seerMs: number): SimReport => ({
    ...report("seer-moonlight", "rollout", [result("verl-like", 2000, 500), result("seer", seerMs, 100), result("oracle", 900, 90), result("arbor", 900, 90)]),
    seed,
  });
  const reports = new Map<string, SimReport[]>([
    // seer 2× faster than verl-like with a tail 80% shorter, at 90% of the oracle; arbor as fast as the oracle.
    ["seer-moonlight", [moonlight(1, 1000)]],
    ["thunder-swe", [report("thunder-swe", "agent", [result("sglang-router", 1000, 100, 100), result("thunderagent", 1000, 100, 150), result("arbor", 1000, 100, 160)])]],
  ]);
  const meta = { command: "arbor sim --reproduction", seeds: [1], scale: 1 };

  it("computes each figure from its systems and judges it against its target", () => {
    const md = reproductionMarkdown(reports, {}, meta);
    const line = (id: string): string => md.split("\n").find((l) => l.startsWith(`| ${id} |`)) ?? "";
    expect(line("seer-moonlight/speedup")).toContain("| 2.00× | ≥ 1.44× | yes |");
    expect(line("seer-moonlight/tail")).toContain("| −80% | −72% or better | yes |");
    expect(line("seer-moonlight/oracle")).toContain("| 90% | ≥ 96% | no | **unattributed** |");
    expect(line("seer-moonlight/arbor")).toContain("| 1.11× | ≥ 1.00× | yes |"); // the oracle is not a system to beat
    expect(line("seer-moonlight/ablation-seer-divided")).toContain("| — |");
    expect(line("seer-moonlight/ablation-seer-divided")).toContain("| not run |");
    expect(line("thunder-swe/thunderagent")).toContain("| 1.50× | ≥ 1.8× | no |");
    expect(line("thunder-swe/arbor")).toContain("| 1.07× |");
    expect(line("seer-kimik2/speedup")).toContain("| not run |");
    expect(md).toContain("## seer-moonlight");
    expect(md).toContain("- a paper, Table 3");
  });

  it("uses the attribution notes, flags the rows missed without one, and is deterministic", () => {
    expect(unattributedRows(reports, {})).toEqual(["seer-moonlight/oracle", "thunder-swe/thunderagent"]);
    const notes = { "seer-moonlight/oracle": "length estimate | too low", "thunder-swe/thunderagent": "tool time short", "seer-kimik2/*": "stopped for time" };
    expect(unattributedRows(reports, notes)).toEqual([]);
    const md = reproductionMarkdown(reports, notes, meta);
    expect(md).toContain("| no | length estimate \\| too low |");
    expect(md).toContain("## seer-kimik2 (not run)\n\nstopped for time");
    expect(reproductionMarkdown(reports, notes, meta)).toBe(md);
    // A workload's scale reads the same whatever order its report holds the keys in (a fresh run or --reuse).
    const one = moonlight(1, 1000);
    const scaled = (scale: Record<string, number>): string => reproductionMarkdown(new Map([["seer-moonlight", [{ ...one, workload: { ...one.workload, scale } }]]]), notes, meta);
    const a = scaled({ instances: 4, gpus: 32, chunkTokens: 8192 });
    expect(a).toContain("Scale: chunkTokens 8192, gpus 32, instances 4.");
    expect(scaled({ chunkTokens: 8192, instances: 4, gpus: 32 })).toBe(a);
  });

  it("over several seeds gives each figure's mean and range, judges the mean and counts the seeds that meet the target", () => {
    // seer's speedup is 2.00× with seed 1 and 1.33× with seed 2 (under the 1.44× target): mean 1.67×.
    const several = new Map([["seer-moonlight", [moonlight(1, 1000), moonlight(2, 1500)]]]);
    const md = reproductionMarkdown(several, {}, { command: "arbor sim --reproduction --seeds 1-2", seeds: [1, 2], scale: 1 });
    const line = (id: string): string => md.split("\n").find((l) => l.startsWith(`| ${id} |`)) ?? "";
    expect(md).toContain("(seeds 1, 2, scale 1)");
    expect(line("seer-moonlight/speedup")).toContain("| 1.67× (1.33× … 2.00×) | ≥ 1.44× | yes (1 of 2 seeds meet it) |");
    // The oracle share: 90% and 60%, mean 75%, met by neither.
    expect(line("seer-moonlight/oracle")).toContain("| 75% (60% … 90%) | ≥ 96% | no (0 of 2 seeds meet it) | **unattributed** |");
    expect(unattributedRows(several, {})).toEqual(["seer-moonlight/oracle"]);
    // The workload's table holds the means: seer's iteration (1,000 + 1,500) / 2 ms.
    expect(md).toContain("Means over seeds 1, 2:");
    expect(md).toContain("| seer | 1 | ");
    const mean = meanReport(several.get("seer-moonlight") as SimReport[]);
    expect(mean.systems[1]?.summary.iterationMs).toBe(1250);
    expect(mean.ratios[1]?.speedup).toBeCloseTo((2 + 4 / 3) / 2, 12);
    expect(() => meanReport([moonlight(1, 1000), { ...moonlight(2, 1000), systems: [] }])).toThrow(/reproduction: the report of seed 2 is not of the same workload, systems and scale as seed 1's/);
  });

  it("gives one run the targets of its workload, or of its kind, each judged on it or naming the systems it needs", () => {
    const lines = (r: SimReport): string[] => targetRows(r.workload).map((row) => targetLine(row, [r]));
    const thunder = (reports.get("thunder-swe") as SimReport[])[0] as SimReport;
    expect(lines(thunder)).toEqual([
      "thunderagent over sglang-router, agent steps/min: 1.50×, target ≥ 1.8×: missed; paper mini-SWE-agent 375 → 672 steps/min (1.79×); 1.8–3.9× over all",
      "arbor over the best other system, agent steps/min: 1.07×, target ≥ 1.00×: met",
    ]);
    // Seer alone: nothing to compare it with, and the line says what to run.
    const alone = lines(report("seer-moonlight", "rollout", [result("seer", 1000, 100)]));
    expect(alone[0]).toBe("seer over verl-like, iteration time: not measured (run seer and verl-like); target ≥ 1.44×; paper 1.79× (3,910 → 2,181 s); 1.44–2.04× over all");
    expect(alone.filter((l) => l.includes("not measured"))).toHaveLength(alone.length);
    // A workload file: Seer's targets on a rollout workload (no ablation rows), "arbor at least the best" on agent programs and replays.
    const own = report("my-rollout", "rollout", [result("verl-like", 2000, 500), result("seer", 1000, 100)]);
    expect(lines(own).map((l) => l.split(":")[0])).toEqual(["seer over verl-like, iteration time", "seer over verl-like, tail (last 10% of requests)", "seer's share of the oracle (oracle time / seer time)", "arbor over the best other system"]);
    expect(lines(own)[0]).toBe("seer over verl-like, iteration time: 2.00×, target ≥ 1.44×: met; paper 1.44–2.04× (throughput +44–104%)");
    // Over several seeds: the mean and range, judged on the mean, with the seeds that meet it counted.
    const [speedupRow] = targetRows(moonlight(1, 1000).workload);
    expect(targetLine(speedupRow as (typeof REPRODUCTION_ROWS)[number], [moonlight(1, 1000), moonlight(2, 1600)])).toBe(
      "seer over verl-like, iteration time: 1.63× (1.25× … 2.00×), target ≥ 1.44×: met (1 of 2 seeds meet it); paper 1.79× (3,910 → 2,181 s); 1.44–2.04× over all",
    );
    for (const kind of ["agent", "replay"] as const) {
      const r = report("my-agents", kind, [result("sglang-router", 1000, 100, 100), result("arbor", 1000, 100, 90)]);
      expect(lines(r)).toEqual(["arbor over the best other system, agent steps/min: 0.90×, target ≥ 1.00×: missed"]);
    }
  });

  it("writes a tail reduction as the tail's signed change, as the papers do", () => {
    expect([tailChange(0.85), tailChange(-0.29), tailChange(0), tailChange(0.004), tailChange(-0.004)]).toEqual(["−85%", "+29%", "0%", "0%", "0%"]);
  });

  it("plans every workload and system a row needs", () => {
    for (const row of REPRODUCTION_ROWS) expect(REPRODUCTION_PLAN[row.workload], row.id).toBeDefined();
    // What a row says it needs is what its workload runs (the arbor rows name arbor and any other system).
    for (const row of REPRODUCTION_ROWS) {
      const named = row.needs === "arbor and a system other than the oracle" ? ["arbor"] : row.needs.split(" and ");
      expect(REPRODUCTION_PLAN[row.workload], row.id).toEqual(expect.arrayContaining(named));
    }
    expect(REPRODUCTION_PLAN["seer-moonlight"]).toEqual(expect.arrayContaining(["seer-divided", "seer-specdec", "oracle"]));
  });
});
