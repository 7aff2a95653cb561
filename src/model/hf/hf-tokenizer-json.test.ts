// The exported tokenizer.json read by an independent implementation of Hugging Face tokenizers
// (`@huggingface/tokenizers`, the pure-JS port transformers.js uses): it must give the ids llama.cpp
// gives (our JS tokenizers are checked against llama.cpp in src/model/made/made-models.test.ts), for
// Arbor's SPM vocabulary and both made-here vocabularies, on fixed and random text.
import { Tokenizer } from "@huggingface/tokenizers";
import fc from "fast-check";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readGgufMetadata } from "../gguf.js";
import { makeModel, MADE_MODEL_KINDS } from "../made/made-models.js";
import { tokenizerFromGguf } from "../made/tokenizer-from-spec.js";
import { ensurePolicy } from "../policy.js";
import { exportHfCheckpoint } from "./hf-export.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-hf-tokjson-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const init = { seed: 1, nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 32, contextLength: 1024 };
const models: [string, string][] = [
  ["arbor", ensurePolicy(join(dir, "in"), init).path],
  ...MADE_MODEL_KINDS.map((k): [string, string] => [k, makeModel(k, join(dir, "in"), init).path]),
];
const FIXED = [
  "What is 12*7+3?",
  "Hi there  friend\n\n  x",
  "héllo wörld 123456 ∑ 😀 日本語",
  '<tool_call>\n{"name": "calc", "arguments": {"input": "1+2"}}\n</tool_call>',
  " leading space",
  "tabs\tand\r\nCRLF",
  "<|im_start|>user\nhi<|im_end|>\n",
  "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
];

describe("exported tokenizer.json in @huggingface/tokenizers", () => {
  for (const [name, path] of models) {
    it(`${name}: the same ids as llama.cpp's tokenizer of the GGUF`, () => {
      const out = join(dir, name);
      exportHfCheckpoint(path, out);
      const hf = new Tokenizer(JSON.parse(readFileSync(join(out, "tokenizer.json"), "utf8")), JSON.parse(readFileSync(join(out, "tokenizer_config.json"), "utf8")));
      const ours = tokenizerFromGguf(readGgufMetadata(path).metadata);
      // Special-token text is parsed as the special token by both (HF: added tokens; ours: special on).
      const same = (s: string): void => expect(hf.encode(s, { add_special_tokens: false }).ids, JSON.stringify(s)).toEqual(ours.encode(s, { special: true }));
      for (const s of FIXED) same(s);
      fc.assert(fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), (s) => {
        same(s);
      }), { seed: 7, numRuns: 150 });
    });
  }
});
