// resume.json: written atomically and read back; a missing or malformed file is refused naming the field;
// a resumed config may differ from the stored one only by more iterations.
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { adoptTrained, configDifference, readResumeState, RESUME_FILE, writeResumeState, type ResumeState } from "./resume-state.js";
import type { MetricsRecord } from "./metrics-log.js";

const root = mkdtempSync(join(tmpdir(), "arbor-resume-state-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config = { name: "r", iterations: 3, train: { lr: 0.003 }, engines: [{ name: "e0", sequences: 4 }] };
const state: ResumeState = {
  format: 1,
  runId: "r-1",
  config,
  completedIterations: 2,
  taskCursor: 8,
  policyVersion: 2,
  checkpoint: "/x/checkpoints/policy-v2.gguf",
  optimizer: "/x/checkpoints/policy-v2.adam.safetensors",
  resumes: 0,
  updatedAt: 5,
};

describe("resume state file", () => {
  it("round-trips, replacing the previous file without leaving a temp file", () => {
    const dir = mkdtempSync(join(root, "ok-"));
    writeResumeState(dir, { ...state, completedIterations: 1 });
    writeResumeState(dir, state);
    expect(readResumeState(dir)).toEqual(state);
    expect(readdirSync(dir)).toEqual([RESUME_FILE]);
  });

  it("refuses a folder without the file, invalid JSON and bad fields, naming them", () => {
    const dir = mkdtempSync(join(root, "bad-"));
    expect(() => readResumeState(dir)).toThrow(/no resume\.json there/);
    const put = (v: unknown): void => writeFileSync(join(dir, RESUME_FILE), typeof v === "string" ? v : JSON.stringify(v));
    put("{");
    expect(() => readResumeState(dir)).toThrow(/is not valid JSON/);
    put({ ...state, format: 2 });
    expect(() => readResumeState(dir)).toThrow(/format must be 1/);
    put({ ...state, completedIterations: -1 });
    expect(() => readResumeState(dir)).toThrow(/completedIterations must be an integer >= 0/);
    put({ ...state, checkpoint: undefined });
    expect(() => readResumeState(dir)).toThrow(/checkpoint is missing for policy version 2/);
    put({ ...state, config: null });
    expect(() => readResumeState(dir)).toThrow(/config must be the run's config object/);
    put({ ...state, heldOut: { base: { version: 0, samples: [{ taskId: "t", sample: 0, solved: "yes" }] }, scores: [] } });
    expect(() => readResumeState(dir)).toThrow(/heldOut\.base\.samples must be a list of \{taskId, sample, solved\}/);
    put({ ...state, heldOut: { base: { version: 0, samples: [] }, scores: [{}] } });
    expect(() => readResumeState(dir)).toThrow(/heldOut\.scores must be a list of scores with their version/);
    put({ ...state, heldOut: { scores: [] } });
    expect(() => readResumeState(dir)).toThrow(/heldOut\.base\.version must be an integer/);
    put({ ...state, consumedTasks: [0, -1] });
    expect(() => readResumeState(dir)).toThrow(/consumedTasks must be a list of task indices \(integers >= 0\)/);
    put({ ...state, session: "" });
    expect(() => readResumeState(dir)).toThrow(/session must be the orchestrator's session id/);
    put({ ...state, consumedTasks: [3, 0] });
    expect(readResumeState(dir).consumedTasks).toEqual([3, 0]);
  });

  it("keeps an iteration trained before a kill cut its evaluation, which a resumed run takes as done", () => {
    const dir = mkdtempSync(join(root, "trained-"));
    const record = { kind: "iteration", index: 3, heldOut: null } as unknown as MetricsRecord;
    const trained = { completedIterations: 3, taskCursor: 12, policyVersion: 3, checkpoint: "/x/checkpoints/policy-v3.gguf", optimizer: "/x/checkpoints/policy-v3.adam.safetensors", record };
    writeResumeState(dir, { ...state, trained });
    const read = readResumeState(dir);
    expect(read.trained).toEqual(trained);
    const { state: adopted, unreported } = adoptTrained(read);
    expect(adopted).toEqual({ ...state, completedIterations: 3, taskCursor: 12, policyVersion: 3, checkpoint: trained.checkpoint, optimizer: trained.optimizer });
    expect(unreported).toEqual(record);
    expect(adoptTrained(state)).toEqual({ state });
    // Only the iteration after the completed ones, with its own metrics line.
    const put = (v: unknown): void => writeFileSync(join(dir, RESUME_FILE), JSON.stringify(v));
    put({ ...state, trained: { ...trained, completedIterations: 4 } });
    expect(() => readResumeState(dir)).toThrow(/trained\.completedIterations must be 3 \(the iteration after the 2 completed\)/);
    put({ ...state, trained: { ...trained, record: { ...record, index: 2 } } });
    expect(() => readResumeState(dir)).toThrow(/trained\.record must be the metrics line of iteration 3/);
    put({ ...state, trained: { ...trained, checkpoint: undefined } });
    expect(() => readResumeState(dir)).toThrow(/trained\.checkpoint is missing for policy version 3/);
  });

  it("keeps a run's held-out evaluation state", () => {
    const dir = mkdtempSync(join(root, "held-"));
    const score = { version: 0, solved: { mean: 0.5, se: 0.1, n: 2 }, baseVersion: 0, tasks: 2, samples: 1, temperature: 1 };
    const withHeldOut: ResumeState = { ...state, heldOut: { base: { version: 0, samples: [{ taskId: "t0", sample: 0, solved: true }, { taskId: "t1", sample: 0, solved: false }] }, scores: [score] } };
    writeResumeState(dir, withHeldOut);
    expect(readResumeState(dir)).toEqual(withHeldOut);
  });
});

describe("configDifference", () => {
  it("accepts the same config and more iterations", () => {
    expect(configDifference(config, structuredClone(config), 2)).toBeUndefined();
    expect(configDifference(config, { ...config, iterations: 5 }, 3)).toBeUndefined();
  });

  it("names the first differing setting, a list's length and iterations below those done", () => {
    expect(configDifference(config, { ...config, train: { lr: 0.01 } }, 2)).toBe("train.lr: stored 0.003, given 0.01");
    expect(configDifference(config, { ...config, engines: [...config.engines, { name: "e1", sequences: 4 }] }, 2)).toBe("engines: stored 1 entries, given 2");
    expect(configDifference(config, { ...config, engines: [{ name: "e0", sequences: 8 }] }, 2)).toBe("engines.0.sequences: stored 4, given 8");
    expect(configDifference(config, { ...config, eval: { tasks: 4 } }, 2)).toBe('eval: stored (not set), given {"tasks":4}');
    expect(configDifference(config, { ...config, iterations: 1 }, 2)).toBe("iterations: 1 is below the 2 iterations already done");
  });
});
