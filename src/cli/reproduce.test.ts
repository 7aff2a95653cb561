// The reproduction command's notes file: row ids checked, a bad one named.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadReproductionNotes } from "./reproduce.js";

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
});
