import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { writeSimReportFiles } from "./report/write-sim-report-files.js";
import { simCommand, simSummaryTable } from "./sim.js";

const SMALL = `
name: tiny
kind: rollout
description: a tiny rollout
sources: ["made up for the test"]
cluster: { gpus: 2, gpusPerInstance: 1, profile: moonlight-16b-a3b/h800, maxNumSeqs: 8, kvTokensPerInstance: 6000 }
workload: { prompts: 8, groupSize: 4, maxTokens: 800, meanTokens: 250, promptTokens: [16, 64], groupSigma: 0.8, sampleSigma: 0.5 }
divided: { chunkTokens: 128 }
sampleMs: 500
`;

describe("arbor sim", () => {
  it("writes the report's files through the renderer (report.json is the report it returns), prints the table with targets", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-sim-"));
    const file = join(dir, "tiny.yaml");
    await writeFile(file, SMALL);
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
      expect(printed).toMatch(/seer ≥ 1\.44× verl-like, tail −72% or better, ≥ 96% of the oracle/);
      expect(err.mock.calls.flat().join("\n")).toMatch(/tiny: seer: iteration/);
      const table = simSummaryTable(report);
      expect(table.rows).toHaveLength(3);
      expect(table.rows[2]?.[10]).toBe(1); // the oracle is 100% of itself
      await expect(simCommand(file, { systems: "seer,nope", seed: 9, scale: 1, out: join(dir, "x") })).rejects.toThrow(/no system 'nope'.*seed 9/);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });
});
