// The JS tokenizers on GGUFs made elsewhere in the tests (ChatML specials over Arbor's pieces, the HF
// tests' byte-level and SentencePiece vocabularies): read from the file's metadata alone, they must
// tokenize and detokenize exactly as llama.cpp does.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Token } from "node-llama-cpp";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { llamaRuntime } from "../../engine/llama-runtime.js";
import { writeByteLevelGguf, writeSpmGguf } from "../../testing/hf-fixtures.js";
import { tinyConfig } from "../config.js";
import { readGgufMetadata, vocabTokenizerSpec, writeGguf } from "../gguf.js";
import { TokenType, Vocab } from "../vocab.js";
import { initWeights } from "../weights.js";
import { tokenizerFromGguf } from "./tokenizer-from-spec.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-fixtures-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Arbor's SPM pieces plus ChatML's `<|im_start|>`/`<|im_end|>` (CONTROL), no BOS added: an SPM vocabulary whose end-of-turn llama.cpp finds by its text. */
function writeArborChatml(path: string): void {
  const spec = vocabTokenizerSpec(new Vocab());
  const tokenizer = {
    ...spec,
    tokens: [...spec.tokens, "<|im_start|>", "<|im_end|>"],
    types: [...spec.types, TokenType.control, TokenType.control],
    scores: [...(spec.scores ?? []), 0, 0],
    addBos: false,
  };
  delete tokenizer.eotId;
  const config = tinyConfig({ nVocab: tokenizer.tokens.length, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 256 });
  writeGguf(path, { config, tokenizer, tensors: initWeights(config, new Rng(5)) });
}

const FIXTURES: [string, (path: string) => void][] = [
  ["ChatML over Arbor's pieces", writeArborChatml],
  ["byte-level BPE, qwen2", (p) => writeByteLevelGguf(p, { pre: "qwen2" })],
  ["byte-level BPE, llama-bpe", (p) => writeByteLevelGguf(p, { pre: "llama-bpe" })],
  ["byte-level BPE, gpt-2", (p) => writeByteLevelGguf(p, { pre: "gpt-2" })],
  ["SentencePiece with space prefix", (p) => writeSpmGguf(p)],
];

const POOL = [..."the quick brown fox THE  \n\t12345.,!?'é日😀\u00a0", "'s", " 've", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", "<|user|>", "hello", " world"];

describe.each(FIXTURES)("%s", (name, write) => {
  it("tokenizes like llama.cpp from the metadata alone", async () => {
    const path = join(dir, `${name.replace(/[^a-z0-9]/gi, "_")}.gguf`);
    write(path);
    const js = tokenizerFromGguf(readGgufMetadata(path).metadata);
    const llama = await llamaRuntime();
    const model = await llama.loadModel({ modelPath: path });
    try {
      const rng = new Rng(11);
      for (let n = 0; n < 150; n++) {
        const text = Array.from({ length: rng.int(0, 16) }, () => rng.pick(POOL)).join("");
        const special = n % 2 === 1;
        const ids = Array.from(model.tokenize(text, special));
        expect(js.encode(text, { special }), JSON.stringify(text)).toEqual(ids);
        expect(js.decode(ids, { special }), JSON.stringify(text)).toBe(model.detokenize(ids as Token[], special));
      }
      const eog = Array.from({ length: js.size }, (_, i) => i).filter((i) => model.isEogToken(i as Token));
      expect([...js.stopIds]).toEqual(eog);
    } finally {
      await model.dispose();
    }
  });
});
