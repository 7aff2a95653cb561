// The tokenizer `arbor inspect` decodes a run's ids with, found from the run's stored config (or --model).
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Vocab } from "../model/vocab.js";
import { decodeIds, runTokenizer } from "./run-tokenizer.js";

const root = join(import.meta.dirname, "../..");
const text = "<|user|>What is 6*7?<|end|><|assistant|>Answer: 42<|end|>";

describe("runTokenizer", () => {
  it("model.vocab arbor: Arbor's vocabulary, decoding with special tokens shown", () => {
    const t = runTokenizer(JSON.stringify({ model: { vocab: "arbor" } }));
    expect(t.tokenizer).toBeDefined();
    expect(decodeIds(t.tokenizer!, new Vocab().encode(text, { special: true }))).toBe(text);
  });

  it("model.path: the GGUF's own tokenizer (here the shipped SFT policy, Arbor's vocabulary)", () => {
    const path = join(root, "models/calc-sft.gguf");
    const t = runTokenizer(JSON.stringify({ model: { path, vocab: "arbor" } }));
    expect(t).toMatchObject({ source: `the run's model.path ${path}` });
    expect(decodeIds(t.tokenizer!, new Vocab().encode(text, { special: true }))).toBe(text);
    // --model wins over the config.
    expect(runTokenizer(JSON.stringify({ model: { vocab: "arbor" } }), path)).toMatchObject({ source: `--model ${path}` });
  });

  it("says why when there is none: a missing file, external backends only, no model, not JSON", () => {
    expect(runTokenizer(JSON.stringify({ model: { path: "/nonexistent/m.gguf" } }))).toEqual({ reason: "the run's model.path /nonexistent/m.gguf does not exist (pass --model <gguf>)" });
    expect(runTokenizer(JSON.stringify({ model: { vocab: "arbor" }, engines: [], backends: [{ type: "vllm" }] })).tokenizer).toBeUndefined();
    expect(runTokenizer(JSON.stringify({ model: { vocab: "arbor" }, engines: [], backends: [{ type: "vllm" }] }))).toMatchObject({ reason: expect.stringMatching(/external backends only/) });
    expect(runTokenizer("{}")).toEqual({ reason: "the run's stored config names no model (pass --model <gguf>)" });
    expect(runTokenizer("not json")).toMatchObject({ reason: expect.stringMatching(/not JSON/) });
  });

  it("decodeIds: undefined for an id outside the vocabulary, never a throw", () => {
    const vocab = new Vocab();
    expect(decodeIds(vocab, [vocab.size])).toBeUndefined();
    expect(decodeIds(vocab, [-1])).toBeUndefined();
  });
});
