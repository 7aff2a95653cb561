import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readGguf, vocabTokenizerSpec, writeGgufRaw } from "./gguf.js";
import { tokenizerMetadata, tokenizerSpecFromGguf, validateTokenizerSpec, type GgufTokenizerSpec } from "./gguf-tokenizer.js";
import { bpeChatmlSpec } from "./made/bpe-vocab.js";
import { spmLlama3Spec } from "./made/spm-vocab.js";
import { Vocab } from "./vocab.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-gguf-tok-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function roundTrip(spec: GgufTokenizerSpec): GgufTokenizerSpec {
  const path = join(dir, "t.gguf");
  writeGgufRaw(path, [["general.architecture", { type: "string", value: "llama" }], ["general.alignment", { type: "u32", value: 32 }], ...tokenizerMetadata(spec)], []);
  return tokenizerSpecFromGguf(readGguf(path).metadata);
}

describe("GGUF tokenizer metadata", () => {
  it.each([
    ["Arbor vocab", vocabTokenizerSpec(new Vocab())],
    ["made BPE", bpeChatmlSpec()],
    ["made SPM", spmLlama3Spec()],
  ])("round-trips the %s spec through a file", (_name, spec) => {
    expect(roundTrip(spec)).toEqual(spec);
  });

  it("writes llama.cpp's key names and value types", () => {
    const meta = new Map(tokenizerMetadata(bpeChatmlSpec()));
    expect(meta.get("tokenizer.ggml.model")).toEqual({ type: "string", value: "gpt2" });
    expect(meta.get("tokenizer.ggml.pre")).toEqual({ type: "string", value: "qwen2" });
    expect(meta.get("tokenizer.ggml.tokens")).toMatchObject({ type: "array", elem: "string" });
    expect(meta.get("tokenizer.ggml.token_type")).toMatchObject({ type: "array", elem: "i32" });
    expect(meta.get("tokenizer.ggml.merges")).toMatchObject({ type: "array", elem: "string" });
    expect(meta.get("tokenizer.ggml.eos_token_id")).toMatchObject({ type: "u32" });
    expect(meta.get("tokenizer.ggml.padding_token_id")).toMatchObject({ type: "u32" });
    expect(meta.get("tokenizer.ggml.add_bos_token")).toEqual({ type: "bool", value: false });
    expect(meta.get("tokenizer.chat_template")).toMatchObject({ type: "string" });
    expect(meta.has("tokenizer.ggml.scores")).toBe(false);
    const spm = new Map(tokenizerMetadata(spmLlama3Spec()));
    expect(spm.get("tokenizer.ggml.scores")).toMatchObject({ type: "array", elem: "f32" });
    expect(spm.get("tokenizer.ggml.eom_token_id")).toMatchObject({ type: "u32" });
    expect(spm.get("tokenizer.ggml.add_space_prefix")).toEqual({ type: "bool", value: false });
  });

  it("refuses malformed specs, naming the field", () => {
    const bpe = bpeChatmlSpec();
    expect(() => validateTokenizerSpec({ ...bpe, model: "t5" as never })).toThrow(/tokenizer.model: 't5' is not supported/);
    expect(() => validateTokenizerSpec({ ...bpe, types: bpe.types.slice(1) })).toThrow(/tokenizer.types: \d+ types for \d+ tokens/);
    expect(() => validateTokenizerSpec({ ...bpe, types: bpe.types.map(() => 9) })).toThrow(/types\[0\]: 9/);
    expect(() => validateTokenizerSpec({ ...bpe, tokens: [...bpe.tokens.slice(0, -1), "a"] })).toThrow(/tokens\[\d+\]: 'a' repeats tokens\[\d+\]/);
    expect(() => validateTokenizerSpec({ ...bpe, merges: undefined })).toThrow(/needs merges/);
    expect(() => validateTokenizerSpec({ ...bpe, pre: undefined })).toThrow(/needs a pre-tokenizer/);
    expect(() => validateTokenizerSpec({ ...bpe, merges: ["ab"] })).toThrow(/merges\[0\]: 'ab' is not "left right"/);
    expect(() => validateTokenizerSpec({ ...bpe, eosId: bpe.tokens.length })).toThrow(/tokenizer.eosId: \d+ is outside the vocabulary/);
    expect(() => validateTokenizerSpec({ ...spmLlama3Spec(), merges: ["a b"] })).toThrow(/only gpt2/);
    expect(() => validateTokenizerSpec({ ...spmLlama3Spec(), scores: [1] })).toThrow(/tokenizer.scores: 1 scores/);
    expect(() => tokenizerMetadata({ ...bpe, tokens: [...bpe.tokens.slice(0, -1), ""] })).toThrow(/empty piece/);
  });

  it("reads a GGUF without a tokenizer, or with another kind, as a one-line error", () => {
    expect(() => tokenizerSpecFromGguf(new Map())).toThrow(/tokenizer.ggml.model: missing/);
    expect(() => tokenizerSpecFromGguf(new Map(), "/m/x.gguf")).toThrow("/m/x.gguf: metadata tokenizer.ggml.model: missing (the file has no tokenizer)");
    expect(() => tokenizerSpecFromGguf(new Map([["tokenizer.ggml.model", "bert"]]))).toThrow(/'bert' is not supported/);
    expect(() => tokenizerSpecFromGguf(new Map<string, unknown>([["tokenizer.ggml.model", "llama"]]))).toThrow(/tokenizer.ggml.tokens: missing/);
    expect(() =>
      tokenizerSpecFromGguf(new Map<string, unknown>([["tokenizer.ggml.model", "llama"], ["tokenizer.ggml.tokens", ["a"]], ["tokenizer.ggml.bos_token_id", 3]])),
    ).toThrow(/GGUF: tokenizer.bosId: 3 is outside/);
    // No token_type array: llama.cpp reads every token as NORMAL.
    expect(tokenizerSpecFromGguf(new Map<string, unknown>([["tokenizer.ggml.model", "llama"], ["tokenizer.ggml.tokens", ["a", "b"]]])).types).toEqual([1, 1]);
  });
});

describe("made vocabularies", () => {
  it("are deterministic and sized 500-1000 tokens", () => {
    for (const make of [bpeChatmlSpec, spmLlama3Spec]) {
      const a = make();
      expect(make()).toEqual(a);
      expect(a.tokens.length).toBeGreaterThan(500);
      expect(a.tokens.length).toBeLessThan(1000);
    }
  });

  it("type ChatML's markers CONTROL and Qwen's tool/think tags USER_DEFINED, as Qwen's GGUFs do", () => {
    const s = bpeChatmlSpec();
    const type = (t: string): number | undefined => s.types[s.tokens.indexOf(t)];
    for (const t of ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) expect(type(t)).toBe(3);
    for (const t of ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]) expect(type(t)).toBe(4);
    // Every merge joins two tokens into a token, so no symbol ever falls back.
    const known = new Set(s.tokens);
    for (const m of s.merges ?? []) {
      const [l, r] = m.split(" ") as [string, string];
      expect(known.has(l) && known.has(r) && known.has(l + r)).toBe(true);
    }
  });

  it("give the SPM vocabulary byte fallback and merge scores in learned order", () => {
    const s = spmLlama3Spec();
    expect(s.tokens.slice(0, 3)).toEqual(["<unk>", "<0x00>", "<0x01>"]);
    expect(s.types.slice(1, 257).every((t) => t === 6)).toBe(true);
    const learned = s.tokens.map((t, i) => ({ t, score: s.scores?.[i] as number, type: s.types[i] })).filter((x) => x.type === 1);
    for (let i = 1; i < learned.length; i++) expect((learned[i] as { score: number }).score).toBeLessThan((learned[i - 1] as { score: number }).score);
    expect(s.tokens).toContain("\u2581the");
  });
});
