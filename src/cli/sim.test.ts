import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { writeTinyRolloutWorkload } from "../testing/tiny-rollout-workload.js";
import { writeSimReportFiles } from "./report/write-sim-report-files.js";
import { tailChange } from "./reproduction.js";
import { simCommand, simSummaryTable } from "./sim.js";

describe("arbor sim", () => {
  it("writes the report's files through the renderer (report.json is the report it returns), prints the table with targets", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-sim-"));
    const file = await writeTinyRolloutWorkload(dir);
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const report = await simCommand(file, {
        systems: "verl-like,seer,oracle",
        seed: 2,
        scale: 1,
        out: join(dir, "out"),
        writeReportFiles: writeSimReportFiles,
      });
      expect(JSON.parse(await readFile(join(dir, "out", "report.json"), "utf8"))).toEqual(report);
      expect(await readFile(join(dir, "out", "report.html"), "utf8")).toContain("tiny");
      expect(report.systems.map((s) => s.system)).toEqual(["verl-like", "seer", "oracle"]);
      const printed = out.mock.calls.flat().join("\n");
      // Seer's targets (a rollout workload file), each judged on this run.
      expect(printed).toMatch(/target: seer over verl-like, iteration time: \d+\.\d\d×, target ≥ 1\.44×: (met|missed)/);
      expect(printed).toMatch(/target: seer's share of the oracle \(oracle time \/ seer time\): \d+%, target ≥ 96%: (met|missed)/);
      expect(printed).toContain("target: arbor over the best other system: not measured (run arbor and a system other than the oracle); target ≥ 1.00×");
      expect(err.mock.calls.flat().join("\n")).toMatch(/tiny: seer: iteration/);
      const table = simSummaryTable(report);
      expect(table.rows).toHaveLength(3);
      expect(table.rows[2]?.[11]).toBe(1); // the oracle is 100% of itself
      expect(table.columns[10]).toBe("tail change");
      expect(table.rows[0]?.[10]).toBe("0%"); // the baseline against itself
      expect(table.rows.slice(1).map((r) => r[10])).toEqual(report.ratios.slice(1).map((r) => tailChange(r.tailReduction)));
      await expect(simCommand(file, { systems: "seer,nope", seed: 9, scale: 1, out: join(dir, "x") })).rejects.toThrow(/no system 'nope'.*seed 9/);
      // Two jobs: each system in a worker thread, which loads the workload file again; the same report.
      const twoJobs = await simCommand(file, { systems: "verl-like,seer,oracle", seed: 2, scale: 1, jobs: 2, out: join(dir, "jobs") });
      expect(JSON.stringify(twoJobs)).toBe(JSON.stringify(report));
      await expect(simCommand(file, { systems: "verl-like,seer", seed: 2, scale: 1, jobs: 0, out: join(dir, "y") })).rejects.toThrow(/--jobs must be an integer from 1 to 64, got 0 \(sim tiny, seed 2/);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });
});
