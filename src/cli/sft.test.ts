// `arbor sft`'s defaults per environment and its unknown-environment error.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sftDefaults } from "./sft.js";

const root = join(import.meta.dirname, "../..");

describe("arbor sft defaults", () => {
  it("fit each environment: generated tasks for calc and search-qa, swe-mini's pool of 24 split 20/4", () => {
    expect(sftDefaults({ env: "calc", steps: 500 })).toEqual({ tasks: 20_000, evalTasks: 16, batchSize: 32, warmupSteps: 50 });
    expect(sftDefaults({ env: "search-qa", steps: 500 })).toEqual({ tasks: 20_000, evalTasks: 16, batchSize: 32, warmupSteps: 50 });
    expect(sftDefaults({ env: "swe-mini", steps: 500 })).toEqual({ tasks: 20, evalTasks: 4, batchSize: 20, warmupSteps: 50 });
  });

  it("keep explicit options and scale the warm-up to short runs", () => {
    expect(sftDefaults({ env: "swe-mini", steps: 10, tasks: 8 })).toEqual({ tasks: 8, evalTasks: 4, batchSize: 8, warmupSteps: 1 });
    expect(sftDefaults({ env: "calc", steps: 10, batchSize: 4, warmupSteps: 0 })).toMatchObject({ batchSize: 4, warmupSteps: 0 });
  });

  it("an unknown environment is the error, naming the known ones, whatever the other options", () => {
    expect(() => sftDefaults({ env: "foo", steps: 5 })).toThrow("unknown environment 'foo' (known: calc, swe-mini, search-qa)");
    const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "sft", "--env", "foo", "--steps", "5", "--out", "/nonexistent/x.gguf", "--no-progress"], { encoding: "utf8", timeout: 120_000 });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe("arbor: error: unknown environment 'foo' (known: calc, swe-mini, search-qa)");
  });
});
