// A shipped example loads from any working directory: its model from the package unless the directory has its own.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PACKAGE_ROOT, loadShippedExample } from "./shipped-example.js";

const elsewhere = mkdtempSync(join(tmpdir(), "arbor-shipped-"));
afterAll(() => rmSync(elsewhere, { recursive: true, force: true }));

describe("loadShippedExample", () => {
  it("takes the quick start's model from the package when the working directory has none", () => {
    const cfg = loadShippedExample("examples/quickstart.yaml", elsewhere);
    expect(cfg.name).toBe("quickstart");
    expect(cfg.model.path).toBe(join(PACKAGE_ROOT, "models/calc-solver.gguf"));
    // The output stays relative: under the working directory of the run.
    expect(cfg.output.dir).toBe(".arbor/runs/quickstart");
  });

  it("keeps a model the working directory has", () => {
    mkdirSync(join(elsewhere, "models"));
    writeFileSync(join(elsewhere, "models/calc-solver.gguf"), "");
    expect(loadShippedExample("examples/quickstart.yaml", elsewhere).model.path).toBe("models/calc-solver.gguf");
  });
});
