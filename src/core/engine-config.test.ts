// The engine fields issue 14 adds to the run config: the llama.cpp build and the model-family parsers.
import { describe, expect, it } from "vitest";
import { loadRunConfig, parseRunConfig } from "./config.js";

describe("engines[] model fields", () => {
  it("defaults to the CPU build and no parsers", () => {
    const e = parseRunConfig({ engines: [{ name: "e0" }] }).engines[0]!;
    expect(e.gpu).toBe(false);
    expect(e.toolParser).toBeUndefined();
    expect(e.reasoningParser).toBeUndefined();
  });

  it("takes gpu: auto and the registry names of the parsers", () => {
    const e = parseRunConfig({ engines: [{ name: "e0", gpu: "auto", toolParser: "hermes", reasoningParser: "think", servedModelName: "qwen2.5-0.5b" }] }).engines[0]!;
    expect(e).toMatchObject({ gpu: "auto", toolParser: "hermes", reasoningParser: "think", servedModelName: "qwen2.5-0.5b" });
  });

  it("refuses gpu: true and an unknown parser, naming the field and the choices", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0", gpu: true }] })).toThrowError(/engines\[0\]\.gpu: must be false \(CPU\) or "auto"/);
    expect(() => parseRunConfig({ engines: [{ name: "e0", toolParser: "qwen" }] })).toThrowError(/engines\[0\]\.toolParser: must be one of arbor, hermes, llama3_json, mistral/);
    expect(() => parseRunConfig({ engines: [{ name: "e0", reasoningParser: "deepseek" }] })).toThrowError(/engines\[0\]\.reasoningParser: must be one of think, none/);
  });
});

describe("engines[].speculative", () => {
  it("is off by default and takes SuffixDecoding's knobs", () => {
    expect(parseRunConfig({ engines: [{ name: "e0" }] }).engines[0]!.speculative).toBeUndefined();
    const e = parseRunConfig({ engines: [{ name: "e0", speculative: { method: "suffix", maxSpecTokens: 6, minTokenProb: 0.2 } }] }).engines[0]!;
    expect(e.speculative).toEqual({ method: "suffix", maxSpecTokens: 6, minTokenProb: 0.2 });
  });

  it("refuses another method, a bad value and an executor that does not speculate, naming the field", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0", speculative: { method: "eagle" } }] })).toThrowError(/engines\[0\]\.speculative\.method: must be "suffix" or "draft-model"/);
    const d = parseRunConfig({ engines: [{ name: "e0", speculative: { method: "draft-model", draftModel: "models/draft.gguf" } }] }).engines[0]!;
    expect(d.speculative).toEqual({ method: "draft-model", draftModel: "models/draft.gguf" });
    expect(() => parseRunConfig({ engines: [{ name: "e0", speculative: { method: "suffix", draftModel: "d.gguf" } }] })).toThrowError(/engines\[0\]\.speculative\.draftModel: only with method "draft-model"/);
    expect(() => parseRunConfig({ engines: [{ name: "e0", speculative: { method: "suffix", maxSpecTokens: 0 } }] })).toThrowError(/engines\[0\]\.speculative\.maxSpecTokens/);
    expect(() => parseRunConfig({ engines: [{ name: "e0", executor: "llamacpp", speculative: { method: "suffix" } }] })).toThrowError(/engines\[0\]\.speculative: speculative decoding runs on the llamacpp-scheduled executor/);
  });
});

describe("examples/real-model.yaml", () => {
  it("is a valid run config serving a downloaded GGUF with its own formats", () => {
    const cfg = loadRunConfig("examples/real-model.yaml");
    expect(cfg.model.path).toMatch(/\.gguf$/);
    expect(cfg.engines[0]).toMatchObject({ toolParser: "hermes", gpu: "auto", servedModelName: "qwen2.5-0.5b-instruct" });
    expect(cfg.train).toBeUndefined();
  });
});

describe("engines[].sampler", () => {
  it("defaults to Arbor's sampler and takes llama.cpp on the llamacpp executor", () => {
    expect(parseRunConfig({ engines: [{ name: "e0" }] }).engines[0]!.sampler).toBe("arbor");
    expect(parseRunConfig({ engines: [{ name: "e0", executor: "llamacpp", sampler: "llama.cpp" }] }).engines[0]!.sampler).toBe("llama.cpp");
  });

  it("refuses another value and another executor, naming the field", () => {
    expect(() => parseRunConfig({ engines: [{ name: "e0", sampler: "vllm" }] })).toThrowError(/engines\[0\]\.sampler: must be "arbor" or "llama\.cpp"/);
    expect(() => parseRunConfig({ engines: [{ name: "e0", sampler: "llama.cpp" }] })).toThrowError(/engines\[0\]\.sampler: llama\.cpp draws the tokens only on the llamacpp executor, not llamacpp-scheduled/);
  });
});

