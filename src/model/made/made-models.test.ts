import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import type { LlamaContext, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { llamaRuntime } from "../../engine/llama-runtime.js";
import { tinyConfig } from "../config.js";
import { readGguf, writeGguf } from "../gguf.js";
import { tokenizerSpecFromGguf, type GgufTokenizerSpec } from "../gguf-tokenizer.js";
import type { ModelTokenizer } from "../tokenizer.js";
import { initWeights } from "../weights.js";
import { bpeChatmlSpec, byteLevelBpeSpec } from "./bpe-vocab.js";
import { madeModelFileName, makeModel, madeTokenizerSpec, type MadeModelKind } from "./made-models.js";
import { tokenizerFromGguf, tokenizerFromSpec } from "./tokenizer-from-spec.js";

const init = { seed: 5, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 64, contextLength: 1024 };
const dir = mkdtempSync(join(tmpdir(), "arbor-made-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
/** node-llama-cpp brands token ids; Arbor's are plain numbers. */
const tok = (ids: readonly number[]): Token[] => ids as Token[];

const TEXTS = [
  "",
  "hello world",
  "Hello World HELLO",
  " leading space",
  "trailing space ",
  "double  spaces  inside",
  "   ",
  " ",
  "tabs\tand\nnewlines\r\n\nend",
  "\n\n\n",
  "  \n  x",
  "héllo wörld ✓ 日本語 😀 e\u0301",
  "nbsp\u00a0and ideographic\u3000space and\u2028line sep and \u0085 nel",
  "digits 1 12 123 1234 1234567 3.14159 -42",
  "I'm sure they'll say it's 42 , ok ? We've THEY'RE don't I'D",
  "' s 'S ' ' spaced apostrophes 're",
  "calc(1+2)*3 = 9; {\"a\": [1, 2]} <tag> </tag> <<>>",
  '{"name": "calc", "arguments": {"expression": "12*7+3"}}',
  "What is (3 + 4) * 5?\nAnswer: 35",
  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
  "<tool_call>\n{\"name\": \"calc\"}\n</tool_call><think>hmm</think>",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|eom_id|><|python_tag|>",
  "<|endoftext|><|end_of_text|><unk><s></s><0x41>",
  "▁literal ▁▁ pieces",
  "lone \ud800 surrogate",
  // Code points whose letter/number class differs between V8's Unicode and llama.cpp's tables.
  "new \u088f\u0c5c\ua7cb x\u{105c0}y \u1c89\u{105c1} 9\u{1e5f1}",
  // Runs of one letter: equal-score pairs, where the leftmost must merge first.
  "alll ooo eee sss rrr ttt ppp lllll eeee",
];

const POOL = [
  ..."ab Z09~!?.,'\"<>|/\\\t\n\r\u0000\u007f\u00e9\u00a0\u0085\u2581\u3000\u65e5\u{1f600}\u0301",
  "'s",
  "'LL",
  " '",
  "  ",
  "123",
  "the",
  " calc",
  '{"name": ',
  "<|im_end|>",
  "<|im_start|>",
  "<tool_call>",
  "</think>",
  "<|eot_id|>",
  "<|begin_of_text|>",
  "<unk>",
];

interface Case {
  name: string;
  spec: GgufTokenizerSpec;
}

/** The two made kinds, and variants that exercise llama.cpp's other pre-tokenizers and the SPM space prefix. */
function cases(): Case[] {
  const bpe = madeTokenizerSpec("bpe-chatml");
  const spm = madeTokenizerSpec("spm-llama3");
  return [
    { name: "bpe-chatml", spec: bpe },
    { name: "spm-llama3", spec: spm },
    // Vocabularies learned with the other pre-tokenizers, so digit groups and contractions have merges.
    { name: "bpe pre=gpt-2", spec: byteLevelBpeSpec("gpt-2") },
    { name: "bpe pre=llama-bpe", spec: { ...byteLevelBpeSpec("llama-bpe"), addBos: undefined } },
    // GLM-4's name: the llama3 split without ignore_merges, and no default BOS.
    { name: "bpe pre=glm4", spec: { ...byteLevelBpeSpec("glm4"), bosId: undefined } },
    // No special ids at all: llama.cpp's gpt2 defaults (BOS = EOS = 11).
    { name: "bpe without ids", spec: { ...bpeChatmlSpec(), bosId: undefined, eosId: undefined, eotId: undefined, padId: undefined } },
    { name: "spm add_space_prefix", spec: { ...spm, addSpacePrefix: true } },
  ];
}

function writeCase(c: Case): string {
  const path = join(dir, `${c.name.replace(/[^a-z0-9-]/gi, "_")}.gguf`);
  const config = tinyConfig({ ...init, nVocab: c.spec.tokens.length });
  writeGguf(path, { config, tokenizer: c.spec, tensors: initWeights(config, new Rng(1)) });
  return path;
}

describe("makeModel", () => {
  it.each(["bpe-chatml", "spm-llama3"] as const)("creates a hash-named %s GGUF once, byte-identical across directories", (kind: MadeModelKind) => {
    const a = makeModel(kind, dir, init);
    expect(a.created).toBe(true);
    expect(a.path).toBe(join(dir, madeModelFileName(kind, init)));
    expect(a.path).toMatch(new RegExp(`${kind}-[0-9a-f]{12}\\.gguf$`));
    const mtime = statSync(a.path).mtimeMs;
    const b = makeModel(kind, dir, init);
    expect(b.created).toBe(false);
    expect(statSync(b.path).mtimeMs).toBe(mtime);
    const other = makeModel(kind, join(dir, "other"), init);
    expect(readFileSync(other.path).equals(readFileSync(a.path))).toBe(true);
    const seed = makeModel(kind, join(dir, "other"), { ...init, seed: 6 });
    expect(seed.path).not.toBe(other.path);

    const g = readGguf(a.path);
    expect(tokenizerSpecFromGguf(g.metadata)).toEqual(a.spec);
    const text = "<|im_start|>user\nWhat is 2+3? <tool_call> ✓<|im_end|>";
    expect(tokenizerFromGguf(g.metadata).encode(text, { special: true })).toEqual(a.tokenizer.encode(text, { special: true }));
    expect(g.metadata.get("general.name")).toBe(`arbor-made-${kind}`);
    expect(a.config.nVocab).toBe(a.spec.tokens.length);
    expect(a.config.nVocab).toBeGreaterThan(700);
    expect(a.config.nVocab).toBeLessThan(1000);
  });

  it("refuses an unknown kind and a non-integer seed", () => {
    expect(() => makeModel("gpt9" as never, dir, init)).toThrow(/made model kind 'gpt9' is unknown/);
    expect(() => makeModel("bpe-chatml", dir, { ...init, seed: 1.5 })).toThrow(/model.init.seed/);
  });
});

describe.each(cases())("$name in llama.cpp", (c: Case) => {
  let model: LlamaModel;
  let js: ModelTokenizer;

  beforeAll(async () => {
    const llama = await llamaRuntime();
    model = await llama.loadModel({ modelPath: writeCase(c) });
    js = tokenizerFromSpec(c.spec);
  });
  afterAll(async () => {
    await model?.dispose();
  });

  it("has llama.cpp's special ids and end-of-generation set", () => {
    // node-llama-cpp reports BOS/EOS only when they are CONTROL tokens (getNapiControlToken); the
    // end-of-generation set below shows llama.cpp's own ids (gpt2's default EOS 11 included).
    const reported = (id: number | undefined): number | null => (id !== undefined && js.isSpecial(id) ? id : null);
    expect(model.tokens.bos).toBe(reported(js.bosId));
    expect(model.tokens.eos).toBe(reported(js.eosId));
    const eog = Array.from({ length: js.size }, (_, i) => i).filter((i) => model.isEogToken(i as Token));
    expect([...js.stopIds]).toEqual(eog);
    expect(js.addBos).toBe(model.tokens.shouldPrependBosToken);
  });

  it.each(TEXTS)("tokenizes %j as llama.cpp, special off and on, and detokenizes alike", (text) => {
    for (const special of [false, true]) {
      const want = Array.from(model.tokenize(text, special));
      expect(js.encode(text, { special }), `special=${special}`).toEqual(want);
      for (const decodeSpecial of [false, true]) {
        expect(js.decode(want, { special: decodeSpecial }), `special=${special}/${decodeSpecial}`).toBe(model.detokenize(tok(want), decodeSpecial));
      }
    }
  });

  it("agrees on seeded random strings and random id sequences", () => {
    const rng = new Rng(42);
    for (let n = 0; n < 120; n++) {
      const text = Array.from({ length: rng.int(0, 14) }, () => rng.pick(POOL)).join("");
      const special = n % 2 === 0;
      expect(js.encode(text, { special }), JSON.stringify(text)).toEqual(Array.from(model.tokenize(text, special)));
      const ids = Array.from({ length: rng.int(1, 12) }, () => rng.int(0, js.size - 1));
      expect(js.decode(ids, { special }), JSON.stringify(ids)).toBe(model.detokenize(tok(ids), special));
    }
  });

  it("reads the chat template back from the file", () => {
    const meta = model.fileInfo.metadata as { tokenizer?: { chat_template?: string } };
    expect(meta.tokenizer?.chat_template).toBe(c.spec.chatTemplate);
  });
});

describe("made templates rendered with Jinja", () => {
  const tools = [
    {
      type: "function",
      function: { name: "calc", description: "Evaluate an integer expression.", parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] } },
    },
  ];
  const messages = [
    { role: "system", content: "Be exact." },
    { role: "user", content: "What is 2+3?" },
    { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "calc", arguments: '{"expression": "2+3"}' } }] },
    { role: "tool", content: "5" },
    { role: "assistant", content: "Answer: 5", reasoning_content: "The tool said 5." },
    { role: "user", content: "And 3*3?" },
  ];
  const render = (kind: MadeModelKind, vars: Record<string, unknown>): string =>
    new Template(madeTokenizerSpec(kind).chatTemplate as string).render({ bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>", add_generation_prompt: true, ...vars });

  it("ChatML: tools in a system <tools> block, Hermes tool calls, tool responses in a user turn", () => {
    const text = render("bpe-chatml", { messages, tools });
    expect(text.startsWith("<|im_start|>system\nBe exact.\n\n# Tools\n")).toBe(true);
    expect(text).toContain(`<tools>\n${JSON.stringify(tools[0]).replaceAll('":', '": ').replaceAll('",', '", ').replaceAll("},", "}, ").replaceAll("],", "], ")}\n</tools>`);
    expect(text).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "calc", "arguments": {"expression": "2+3"}}\n</tool_call><|im_end|>\n');
    expect(text).toContain("<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n");
    expect(text).toContain("<|im_start|>assistant\n<think>\nThe tool said 5.\n</think>\n\nAnswer: 5<|im_end|>\n");
    expect(text.endsWith("<|im_start|>user\nAnd 3*3?<|im_end|>\n<|im_start|>assistant\n")).toBe(true);
    expect(render("bpe-chatml", { messages: messages.slice(1, 2) })).toBe(
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  it("Llama 3: tools in the system turn, JSON calls with parameters, ipython results", () => {
    const text = render("spm-llama3", { messages, tools });
    expect(text.startsWith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n")).toBe(true);
    expect(text).toContain(JSON.stringify(tools[0], null, 4));
    expect(text).toContain('<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "calc", "parameters": {"expression": "2+3"}}<|eot_id|>');
    expect(text).toContain("<|start_header_id|>ipython<|end_header_id|>\n\n5<|eot_id|>");
    expect(text.endsWith("<|start_header_id|>user<|end_header_id|>\n\nAnd 3*3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")).toBe(true);
  });

  it.each(["bpe-chatml", "spm-llama3"] as const)("%s: the rendered prompt tokenizes alike in JS and llama.cpp, specials as single ids", async (kind) => {
    const made = makeModel(kind, dir, init);
    const llama = await llamaRuntime();
    const model = await llama.loadModel({ modelPath: made.path });
    let context: LlamaContext | undefined;
    try {
      const text = render(kind, { messages, tools });
      const ids = made.tokenizer.encode(text, { special: true });
      expect(ids).toEqual(Array.from(model.tokenize(text, true)));
      expect(made.tokenizer.decode(ids, { special: true })).toBe(text);
      const end = kind === "bpe-chatml" ? "<|im_end|>" : "<|eot_id|>";
      const endId = made.tokenizer.encode(end, { special: true });
      expect(endId).toHaveLength(1);
      expect(ids.filter((id) => id === endId[0]).length).toBe(text.split(end).length - 1);
      // The model runs: a short greedy continuation of the prompt, ids in the vocabulary.
      context = await model.createContext({ contextSize: 1024, sequences: 1, threads: 1 });
      const seq = context.getSequence();
      const out: number[] = [];
      for await (const t of seq.evaluate(tok(ids), { temperature: 0 })) {
        out.push(t);
        if (out.length >= 6) break;
      }
      expect(out).toHaveLength(6);
      for (const id of out) expect(id).toBeLessThan(made.tokenizer.size);
    } finally {
      await context?.dispose();
      await model.dispose();
    }
  });
});
