import { describe, expect, it } from "vitest";
import { loadRunConfig, parseRunConfig } from "../core/config.js";

const engines = [{ name: "e0" }];

describe("training config (iterations, train)", () => {
  it("defaults to one iteration without training, and fills train's defaults", () => {
    const plain = parseRunConfig({ engines });
    expect(plain.iterations).toBe(1);
    expect(plain.train).toBeUndefined();
    const cfg = parseRunConfig({ engines, iterations: 3, train: {} });
    expect(cfg.train).toEqual({ estimator: "grpo", estimatorOptions: {}, lr: 1e-3, epochs: 1, lrSchedule: "constant", warmupSteps: 0, maxGradNorm: 1, keepCheckpoints: 3, trainer: "reference" });
  });

  it("rejects settings that cannot train, naming the field", () => {
    expect(() => parseRunConfig({ engines, iterations: 2 })).toThrow(/iterations: more than one iteration needs `train`/);
    expect(() => parseRunConfig({ backends: [{ name: "x", type: "vllm", url: "http://127.0.0.1:1" }], train: {} })).toThrow(
      /backends\[0\]\.weightSync: training must get every policy version onto backend 'x'; add weightSync \(kind: sglang, vllm-reload, vllm-lora or llamacpp-restart\)/,
    );
    expect(() => parseRunConfig({ engines, train: { lr: 0 } })).toThrow(/train\.lr/);
    expect(() => parseRunConfig({ engines, iterations: 0, train: {} })).toThrow(/iterations/);
    expect(() => parseRunConfig({ engines, train: { lr: 1e-3, typo: 1 } })).toThrow(/train/);
    expect(() => parseRunConfig({ engines, train: { lrScale: { "output_norm.weight": -1 } } })).toThrow(/train\.lrScale\.output_norm\.weight/);
    expect(() => parseRunConfig({ engines, train: { trainer: "external", lrScale: { "output_norm.weight": 10 } } })).toThrow(/train\.lrScale: is the reference trainer's/);
  });

  it("checks weightSync: its kind, options of other kinds, managed llama-servers, in-process engines", () => {
    const vllm = { name: "v", type: "vllm", url: "http://127.0.0.1:1/v1" };
    expect(parseRunConfig({ backends: [{ ...vllm, weightSync: { kind: "vllm-reload" } }], train: {} }).backends[0]?.weightSync).toEqual({
      kind: "vllm-reload",
      inFlightOnWeightSwitch: "finish",
      timeoutMs: 600_000,
      drainTimeoutMs: 600_000,
      args: [],
      port: 0,
      slots: "save",
    });
    expect(() => parseRunConfig({ backends: [{ ...vllm, weightSync: { kind: "tgi" } }] })).toThrow(/backends\[0\]\.weightSync\.kind: must be one of sglang, vllm-reload, vllm-lora, llamacpp-restart/);
    expect(() => parseRunConfig({ backends: [{ ...vllm, weightSync: { kind: "sglang", sleepLevel: 1 } }] })).toThrow(/weightSync\.sleepLevel: only used with kind: vllm-reload/);
    expect(() => parseRunConfig({ backends: [{ ...vllm, weightSync: { kind: "vllm-lora", args: ["-c", "1"] } }] })).toThrow(/weightSync\.args: only used with kind: llamacpp-restart/);
    expect(() => parseRunConfig({ backends: [{ ...vllm, weightSync: { kind: "llamacpp-restart" } }] })).toThrow(/llamacpp-restart manages a llama-server: backend 'v' must have type: llamacpp/);
    expect(() => parseRunConfig({ backends: [{ name: "l", type: "llamacpp", url: "http://127.0.0.1:1", weightSync: { kind: "llamacpp-restart" } }] })).toThrow(/backends\[0\]\.url: backend 'l' is a llama-server Arbor starts .* set weightSync\.port instead of url/);
    expect(parseRunConfig({ backends: [{ name: "l", type: "llamacpp", weightSync: { kind: "llamacpp-restart", port: 8090 } }], train: {} }).backends[0]?.weightSync?.port).toBe(8090);
    expect(() => parseRunConfig({ engines, backends: [{ name: "e0", type: "builtin", weightSync: { kind: "sglang" } }] })).toThrow(/backend 'e0' is the in-process engine of that name, which loads weights itself; remove weightSync/);
  });

  it("accepts the shipped fleet examples: every backend syncs weights through its engine's API", () => {
    const vllm = loadRunConfig("examples/vllm-fleet.yaml");
    expect(vllm.backends.map((b) => [b.type, b.weightSync?.kind])).toEqual([
      ["vllm", "vllm-reload"],
      ["vllm", "vllm-reload"],
    ]);
    expect(vllm.train?.trainer).toBe("reference");
    const sglang = loadRunConfig("examples/sglang-fleet.yaml");
    expect(sglang.backends.map((b) => [b.type, b.weightSync?.kind, b.weightSync?.inFlightOnWeightSwitch])).toEqual([
      ["sglang", "sglang", "finish"],
      ["sglang", "sglang", "resume"],
    ]);
    expect(sglang.train?.trainer).toBe("external");
  });

  it("accepts the shipped quick-start config", () => {
    const cfg = loadRunConfig("examples/quickstart.yaml");
    expect(cfg.model.path).toBe("models/calc-solver.gguf");
    expect(cfg.iterations).toBeGreaterThan(1);
    expect(cfg.train?.estimator).toBe("grpo");
    expect(cfg.train?.lrScale).toEqual({ "output_norm.weight": 1500 });
    expect(cfg.eval).toEqual({ tasks: 48, samples: 4, temperature: 1, every: 4 });
  });

  it("accepts the shipped learn-calc config: the stronger checkpoint, held-out evaluation and shaping options", () => {
    const cfg = loadRunConfig("examples/learn-calc.yaml");
    expect(cfg.model.path).toBe("models/calc-solver.gguf");
    expect(cfg.eval).toEqual({ tasks: 400, samples: 4, temperature: 1, every: 6 });
    expect(cfg.train).toMatchObject({ lr: 0.0001, epochs: 2, lrSchedule: "constant", lrScale: { "output_norm.weight": 1000 } });
    expect(cfg.env).toMatchObject({ name: "calc", tasks: 32 });
    expect(cfg.reward).toMatchObject({ outcome: 1, process: 0 });
    expect(cfg.train?.estimatorOptions).toEqual({ positiveOnly: true, zeroAdvantageUnsolvedGroups: true });
  });
});
