import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type Llama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { renderChat, stopTokenIds } from "./chat-template.js";
import { configFromGguf, readGguf } from "./gguf.js";
import { ensurePolicy, policyFileName } from "./policy.js";
import { Vocab } from "./vocab.js";

const init = { seed: 3, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 1024 };
const dir = mkdtempSync(join(tmpdir(), "arbor-policy-"));
const vocab = new Vocab();
/** node-llama-cpp brands token ids; Arbor's are plain numbers. */
const tok = (ids: number[]): Token[] => ids as Token[];

const TEXTS = [
  "hello world",
  "héllo wörld ✓ 日本",
  " leading space",
  "trailing space ",
  "double  spaces  inside",
  "   ",
  "tabs\tand\nnewlines\r\n\nend",
  "<s> </s> <|user|> <0x41> ▁ literal",
  "emoji 😀 and combining é",
  "calc(1+2)*3 = 9; {\"a\": [1, 2]}",
];

describe("ensurePolicy", () => {
  it("creates a hash-named GGUF once and re-uses it", () => {
    const a = ensurePolicy(dir, init);
    expect(a.created).toBe(true);
    expect(a.path).toBe(join(dir, policyFileName(init)));
    expect(a.path).toMatch(/policy-[0-9a-f]{12}\.gguf$/);
    const mtime = statSync(a.path).mtimeMs;
    const b = ensurePolicy(dir, init);
    expect(b).toEqual({ ...a, created: false });
    expect(statSync(b.path).mtimeMs).toBe(mtime);

    const g = readGguf(a.path);
    expect(configFromGguf(g.metadata)).toEqual({ ...a.config, rmsEps: Math.fround(a.config.rmsEps) });
    expect(g.metadata.get("arbor.policy_version")).toBe(0);
  });

  it("is byte-identical across directories for one init and differs for another seed", () => {
    const other = join(dir, "other");
    const a = ensurePolicy(dir, init);
    const b = ensurePolicy(other, init);
    expect(b.created).toBe(true);
    expect(readFileSync(a.path).equals(readFileSync(b.path))).toBe(true);
    const c = ensurePolicy(other, { ...init, seed: 4 });
    expect(c.path).not.toBe(b.path);
    expect(readFileSync(c.path).equals(readFileSync(b.path))).toBe(false);
  });

  it("rejects an invalid init with the field named", () => {
    expect(() => ensurePolicy(dir, { ...init, nHead: 3 })).toThrow(/nEmbd \(32\) must be divisible by nHead \(3\)/);
  });
});

describe("the written GGUF in llama.cpp", () => {
  let llama: Llama;
  let model: LlamaModel;
  let context: LlamaContext;

  beforeAll(async () => {
    const { path } = ensurePolicy(dir, init);
    llama = await getLlama({ gpu: false, build: "never" });
    model = await llama.loadModel({ modelPath: path });
    context = await model.createContext({ contextSize: 1024, sequences: 1, threads: 1 });
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    await llama?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reports the vocabulary's special tokens", () => {
    expect(model.tokens.bos).toBe(vocab.bosId);
    expect(model.tokens.eos).toBe(vocab.eosId);
    expect(model.tokens.eot).toBe(vocab.controlId("<|end|>"));
    for (const id of stopTokenIds(vocab)) expect(model.isEogToken(id as Token)).toBe(true);
    expect(model.isEogToken(vocab.controlId("<|user|>") as Token)).toBe(false);
  });

  it.each(TEXTS)("tokenizes %j exactly like Vocab.encode and detokenizes it back", (text) => {
    const ids = Array.from(model.tokenize(text));
    expect(ids).toEqual(vocab.encode(text));
    // SPM reads a literal "▁" as its space piece; everything else round-trips exactly.
    const back = text.replaceAll("\u2581", " ");
    expect(model.detokenize(ids)).toBe(back);
    expect(vocab.decode(ids)).toBe(back);
  });

  it("agrees with Vocab on seeded random strings and token sequences", () => {
    const rng = new Rng(42);
    const pool = [..."ab Z09~!<>|/\\\t\n\r\u0000\u007f\u00e9\u2581\u2582\u65e5\u{1f600}", "<|end|>", "<s>", "<0x41>", "  "];
    for (let n = 0; n < 60; n++) {
      const text = Array.from({ length: rng.int(0, 12) }, () => rng.pick(pool)).join("");
      expect(Array.from(model.tokenize(text)), JSON.stringify(text)).toEqual(vocab.encode(text));
      // Random ids (byte tokens in any order, markers; no <s>/</s>/<unk>) decode alike.
      const ids = Array.from({ length: rng.int(1, 10) }, () => rng.int(3, vocab.size - 1));
      expect(vocab.decode(ids), JSON.stringify(ids)).toBe(model.detokenize(tok(ids), true));
    }
  });

  it("parses control tokens only when asked, matching renderChat", () => {
    expect(Array.from(model.tokenize("<|user|>hi<|end|>", true))).toEqual([
      vocab.controlId("<|user|>"),
      ...vocab.encode("hi"),
      vocab.controlId("<|end|>"),
    ]);
    const prompt = renderChat([{ role: "user", content: "1 + 2 = ?" }], (t) => vocab.encode(t), vocab);
    expect(Array.from(model.tokenize("<s><|user|>1 + 2 = ?<|end|><|assistant|>", true))).toEqual(prompt);
    expect(model.detokenize(tok(prompt), true)).toBe("<s><|user|>1 + 2 = ?<|end|><|assistant|>");
  });

  it("runs a reproducible greedy generation", async () => {
    const prompt = renderChat([{ role: "user", content: "hi" }], (t) => vocab.encode(t), vocab);
    const generate = async (): Promise<number[]> => {
      const seq = context.getSequence();
      try {
        const out: number[] = [];
        for await (const token of seq.evaluate(tok(prompt), { temperature: 0 })) {
          out.push(token);
          if (out.length >= 12) break;
        }
        return out;
      } finally {
        seq.dispose();
      }
    };
    const first = await generate();
    expect(first).toHaveLength(12);
    for (const id of first) expect(id).toBeLessThan(vocab.size);
    expect(await generate()).toEqual(first);
  });
});
