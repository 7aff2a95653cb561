import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadRunConfig, parseRunConfig } from "./config.js";
import { ArborError } from "./errors.js";

function writeTmp(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "arbor-cfg-"));
  const p = join(dir, "c.yaml");
  writeFileSync(p, text);
  return p;
}

describe("run config", () => {
  it("fills defaults for a minimal config", () => {
    const cfg = parseRunConfig({ engines: [{ name: "e0" }] });
    expect(cfg.rollout.groupSize).toBe(4);
    expect(cfg.engines[0]?.sequences).toBe(4);
    expect(cfg.model.init.nEmbd).toBe(64);
  });

  it("names the field path and reason of an invalid value", () => {
    const p = writeTmp("engines: [{name: e0}]\nrollout:\n  groupSize: 0\n");
    expect(() => loadRunConfig(p)).toThrowError(/rollout\.groupSize: .*>=\s*1/);
  });

  it("rejects an unknown backend type naming the field", () => {
    try {
      parseRunConfig({ backends: [{ name: "b", type: "nosuch", url: "http://127.0.0.1:1/v1" }] });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ArborError);
      expect((e as Error).message).toMatch(/backends\[0\]\.type: /);
      expect((e as Error).message).toContain("builtin");
    }
  });

  it("rejects unknown keys", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0" }], rollot: {} })).toThrowError(/rollot/);
  });

  it("rejects an engine name used twice, an empty output.dir, and too little memory for a black-box agent under bwrap", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0" }, { name: "e1" }, { name: "e0" }] })).toThrowError(/engines\[2\]\.name: 'e0' is used twice/);
    expect(() => parseRunConfig({ engines: [{ name: "e0" }], output: { dir: "" } })).toThrowError(/output\.dir: must not be empty/);
    const blackBox = { engines: [{ name: "e0" }], agent: { kind: "black-box", command: ["/bin/sh", "-c", "echo hi"] } };
    expect(() => parseRunConfig(blackBox)).toThrowError(/sandbox\.memoryMb: 256 is too little for a black-box agent: .*set at least 1024/);
    expect(parseRunConfig({ ...blackBox, sandbox: { memoryMb: 1024 } }).sandbox.memoryMb).toBe(1024);
    // Docker and Kubernetes limit the container's memory, not its address space.
    expect(parseRunConfig({ ...blackBox, sandbox: { provider: "docker" } }).sandbox.memoryMb).toBe(256);
  });

  it("rejects a backend with neither url nor in-process engine", () => {
    expect(() => parseRunConfig({ backends: [{ name: "x", type: "builtin" }] })).toThrowError(
      /backends\[0\]\.url: backend 'x' has no url/,
    );
  });

  it("reports YAML syntax errors and missing files in one line", () => {
    expect(() => loadRunConfig(writeTmp("engines: [\n"))).toThrowError(/YAML syntax/);
    expect(() => loadRunConfig("/nonexistent/x.yaml")).toThrowError(/no such file/);
  });

  it("held-out evaluation: defaults, off when absent, needs training, and names a bad field", () => {
    const train = { engines: [{ name: "e0" }], train: {} };
    expect(parseRunConfig(train).eval).toBeUndefined();
    expect(parseRunConfig({ ...train, eval: {} }).eval).toEqual({ tasks: 32, samples: 4, every: 1 });
    expect(parseRunConfig({ ...train, eval: { tasks: 8, samples: 2, temperature: 0.5, every: 3 } }).eval).toEqual({ tasks: 8, samples: 2, temperature: 0.5, every: 3 });
    expect(() => parseRunConfig({ ...train, eval: { samples: 0 } })).toThrowError(/eval\.samples: .*>=\s*1/);
    expect(() => parseRunConfig({ ...train, eval: { every: 1.5 } })).toThrowError(/eval\.every: /);
    expect(() => parseRunConfig({ ...train, eval: { temperature: -1 } })).toThrowError(/eval\.temperature: /);
    expect(() => parseRunConfig({ ...train, eval: { task: 3 } })).toThrowError(/eval: .*task/);
    expect(() => parseRunConfig({ engines: [{ name: "e0" }], eval: {} })).toThrowError(/eval: held-out evaluation compares policy versions: it needs `train`/);
  });

  it("advantage-shaping estimator options are checked when the config is read, naming the field", () => {
    const opts = (estimatorOptions: Record<string, unknown>, reward: Record<string, unknown> = {}) => parseRunConfig({ engines: [{ name: "e0" }], train: { estimatorOptions }, reward });
    expect(opts({ negativeAdvantageScale: 0.25, negativeAdvantageFloor: -1, zeroAdvantageUnsolvedGroups: true, positiveOnly: false, clipRatioC: 3 }).train?.estimatorOptions).toMatchObject({ negativeAdvantageScale: 0.25, clipRatioC: 3 });
    expect(() => opts({ negativeAdvantageScale: -1 })).toThrowError(/train\.estimatorOptions\.negativeAdvantageScale: must be >= 0/);
    expect(() => opts({ negativeAdvantageFloor: 0.5 })).toThrowError(/train\.estimatorOptions\.negativeAdvantageFloor: must be <= 0/);
    expect(() => opts({ positiveOnly: "yes" })).toThrowError(/train\.estimatorOptions\.positiveOnly: /);
    expect(() => opts({ zeroAdvantageUnsolvedGroups: true }, { outcome: 0, process: 1 })).toThrowError(/zeroAdvantageUnsolvedGroups: needs the outcome reward/);
  });
  it("train.epochs and the learning-rate schedule: defaults, values, and errors naming the field", () => {
    const train = (t: Record<string, unknown>) => parseRunConfig({ engines: [{ name: "e0" }], train: t }).train;
    expect(train({})).toMatchObject({ epochs: 1, lrSchedule: "constant", warmupSteps: 0 });
    expect(train({ epochs: 4, lrSchedule: "cosine", warmupSteps: 2 })).toMatchObject({ epochs: 4, lrSchedule: "cosine", warmupSteps: 2 });
    expect(() => train({ epochs: 0 })).toThrowError(/train\.epochs: /);
    expect(() => train({ epochs: 1.5 })).toThrowError(/train\.epochs: /);
    expect(() => train({ lrSchedule: "linear" })).toThrowError(/train\.lrSchedule: must be 'constant' or 'cosine'/);
    expect(() => train({ warmupSteps: 3 })).toThrowError(/train\.warmupSteps: is the cosine schedule's warm-up/);
    expect(() => train({ trainer: "external", epochs: 2 })).toThrowError(/train\.epochs: is the reference trainer's/);
    expect(() => train({ trainer: "external", lrSchedule: "cosine" })).toThrowError(/train\.lrSchedule: is the reference trainer's/);
  });
  it("train.draftModel: defaults, values, and errors naming the field", () => {
    const train = (t: Record<string, unknown>) => parseRunConfig({ engines: [{ name: "e0" }], train: t }).train;
    expect(train({})?.draftModel).toBeUndefined();
    expect(train({ draftModel: {} })?.draftModel).toEqual({ layers: 1, steps: 20, batch: 8, lr: 1e-4, topK: 16 });
    expect(train({ draftModel: { layers: 2, topK: 4 } })?.draftModel).toMatchObject({ layers: 2, topK: 4 });
    expect(() => train({ draftModel: { layers: 0 } })).toThrowError(/train\.draftModel\.layers: /);
    expect(() => train({ draftModel: { lr: -1 } })).toThrowError(/train\.draftModel\.lr: /);
    expect(() => train({ draftModel: { topk: 4 } })).toThrowError(/train\.draftModel: .*topk/);
    expect(() => train({ trainer: "external", draftModel: {} })).toThrowError(/train\.draftModel: is trained by the reference trainer/);
  });
});
