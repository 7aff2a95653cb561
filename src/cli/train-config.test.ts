import { describe, expect, it } from "vitest";
import { loadRunConfig, parseRunConfig } from "../core/config.js";

const engines = [{ name: "e0" }];

describe("training config (iterations, train)", () => {
  it("defaults to one iteration without training, and fills train's defaults", () => {
    const plain = parseRunConfig({ engines });
    expect(plain.iterations).toBe(1);
    expect(plain.train).toBeUndefined();
    const cfg = parseRunConfig({ engines, iterations: 3, train: {} });
    expect(cfg.train).toEqual({ estimator: "grpo", estimatorOptions: {}, lr: 1e-3, maxGradNorm: 1, keepCheckpoints: 3, trainer: "reference" });
  });

  it("rejects settings that cannot train, naming the field", () => {
    expect(() => parseRunConfig({ engines, iterations: 2 })).toThrow(/iterations: more than one iteration needs `train`/);
    expect(() => parseRunConfig({ backends: [{ name: "x", type: "vllm", url: "http://127.0.0.1:1" }], train: {} })).toThrow(/train: training syncs weights to in-process engines/);
    expect(() => parseRunConfig({ engines, train: { lr: 0 } })).toThrow(/train\.lr/);
    expect(() => parseRunConfig({ engines, iterations: 0, train: {} })).toThrow(/iterations/);
    expect(() => parseRunConfig({ engines, train: { lr: 1e-3, typo: 1 } })).toThrow(/train/);
  });

  it("accepts the shipped quick-start config", () => {
    const cfg = loadRunConfig("examples/quickstart.yaml");
    expect(cfg.model.path).toBe("models/calc-sft.gguf");
    expect(cfg.iterations).toBeGreaterThan(1);
    expect(cfg.train?.estimator).toBe("grpo");
  });
});
