// `arbor sft`'s defaults per environment, its unknown-environment error and its errors naming the flags.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sftCommand, sftDefaults, type SftCommandOptions } from "./sft.js";

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

  it("flags that do not fit together are refused naming the flags, before anything is written", async () => {
    const base: SftCommandOptions = { env: "swe-mini", taskSeed: 1, steps: 10, lr: 1e-3, schedule: "cosine", seed: 1, out: "/nonexistent/x.gguf", nEmbd: 64, nLayer: 2, nHead: 4, nFf: 192, progress: false };
    await expect(sftCommand({ ...base, batchSize: 32 })).rejects.toThrow("sft: --batch-size (32) must not exceed the training tasks (20, --tasks)");
    await expect(sftCommand({ ...base, warmupSteps: 10 })).rejects.toThrow("sft: --warmup-steps (10) must be less than --steps (10)");
    await expect(sftCommand({ ...base, from: "/nonexistent/policy.gguf" })).rejects.toThrow("sft: --from: no such file: /nonexistent/policy.gguf");
    await expect(sftCommand({ ...base, nEmbd: 65 })).rejects.toThrow("sft: --n-embd (65) must be divisible by --n-head (4)");
  });

  it("a flag out of its range is refused by its parser, naming the flag", () => {
    const r = spawnSync(process.execPath, [join(root, "bin/arbor.mjs"), "sft", "--steps", "0", "--out", "/nonexistent/x.gguf", "--no-progress"], { encoding: "utf8", timeout: 120_000 });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe("error: option '--steps <n>' argument '0' is invalid. must be an integer >= 1, got 0");
  });
});
