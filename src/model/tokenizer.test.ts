import { describe, expect, it } from "vitest";
import { checkTokenId } from "./tokenizer.js";
import { modelTokenizerContract } from "./tokenizer.contract.js";
import { bpeChatmlSpec } from "./made/bpe-vocab.js";
import { spmLlama3Spec } from "./made/spm-vocab.js";
import { tokenizerFromSpec } from "./made/tokenizer-from-spec.js";
import { Vocab } from "./vocab.js";

modelTokenizerContract("Arbor Vocab", () => new Vocab(), { controlTexts: ["<s>", "</s>", "<unk>", "<|user|>", "<|end|>", "<|tool_call|>"] });

modelTokenizerContract("made BPE + ChatML", () => tokenizerFromSpec(bpeChatmlSpec()), {
  controlTexts: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
  alwaysParsedTexts: ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"],
});

modelTokenizerContract("made SPM + Llama 3", () => tokenizerFromSpec(spmLlama3Spec()), {
  controlTexts: ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<unk>"],
});

// The same SPM vocabulary with llama.cpp's SPM default of a space prefix: still round-trips plain text.
modelTokenizerContract("made SPM with add_space_prefix", () => tokenizerFromSpec({ ...spmLlama3Spec(), addSpacePrefix: true }), {
  controlTexts: ["<|begin_of_text|>", "<|eot_id|>"],
  spacePrefix: true,
});

describe("tokenizerFromSpec", () => {
  it("refuses an unknown model or pre-tokenizer by name", () => {
    expect(() => tokenizerFromSpec({ ...bpeChatmlSpec(), model: "bert" as never })).toThrow(/'bert' has no JS tokenizer/);
    expect(() => tokenizerFromSpec({ ...bpeChatmlSpec(), pre: "nope" })).toThrow(/tokenizer.pre 'nope' is not supported/);
  });

  it("gives the longest token's length in characters, for the engine's context bound", () => {
    const bpe = tokenizerFromSpec(bpeChatmlSpec()) as unknown as { maxTokenChars: number };
    const longest = Math.max(...bpeChatmlSpec().tokens.map((t) => t.length));
    expect(bpe.maxTokenChars).toBeGreaterThan(5);
    expect(bpe.maxTokenChars).toBeLessThanOrEqual(longest);
  });

  it("checkTokenId names where the id came from", () => {
    expect(() => checkTokenId({ size: 3 }, 3, "prompt id")).toThrow(/prompt id 3 is outside the vocabulary \(size 3\)/);
  });
});
