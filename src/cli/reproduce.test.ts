// The reproduction command's notes file (row ids checked, a bad one named) and its reuse of a report written before.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { simReportFixture, simResultFixture } from "../testing/sim-report-fixture.js";
import { loadReproductionNotes, simRunner } from "./reproduce.js";
import { writeSimReportFiles } from "./report/write-sim-report-files.js";

describe("reproduction notes", () => {
  const dir = mkdtempSync(join(tmpdir(), "arbor-notes-"));

  it("reads a map of row ids to attributions; a missing file is no notes", () => {
    const path = join(dir, "notes.yaml");
    writeFileSync(path, "seer-moonlight/oracle: the length estimate lags\nthunder-swe/*: tool time from the paper's Fig. 3\n");
    expect(loadReproductionNotes(path)).toEqual({ "seer-moonlight/oracle": "the length estimate lags", "thunder-swe/*": "tool time from the paper's Fig. 3" });
    expect(loadReproductionNotes(join(dir, "none.yaml"))).toEqual({});
  });

  it("names a key that is not a row id", () => {
    const path = join(dir, "bad.yaml");
    writeFileSync(path, "Seer Moonlight: slow\n");
    expect(() => loadReproductionNotes(path)).toThrow(/bad\.yaml: Seer Moonlight: a row id: <workload>\/<figure>/);
  });

  it("reuses a workload's report of the same seed, scale and systems instead of running it again", async () => {
    const out = join(dir, "sim");
    const systems = ["verl-like", "sglang-router", "thunderagent", "arbor"];
    const fixture = simReportFixture("search-agent", "agent", systems.map((s, i) => simResultFixture(s, 1000 - i, 10, 100 + i)));
    const saved = { ...fixture, seed: 7, workload: { ...fixture.workload, scale: { runScale: 0.5 } } };
    mkdirSync(join(out, "search-agent"), { recursive: true });
    await writeSimReportFiles(saved, join(out, "search-agent"));
    const logged: string[] = [];
    const run = simRunner({ out, reuse: true, log: (l) => logged.push(l) });
    // The same seed and scale: the saved report, not a new run (a run would give other figures).
    expect(await run("search-agent", systems, { seed: 7, scale: 0.5 })).toEqual(saved);
    expect(logged.join("\n")).toMatch(/search-agent: the report in .*same seed, scale and systems/);
  });
});

