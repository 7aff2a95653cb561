// Conversion of Hugging Face checkpoints to GGUF: the tiny policy's round trip (GGUF → HF → GGUF is the
// same file's tensors and tokenizer), a byte-level BPE round trip, qwen2 checkpoints in BF16 and F16
// (single and sharded), and a one-line error naming the file for each kind of bad input.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readGguf } from "../gguf.js";
import { ensurePolicy } from "../policy.js";
import { readSafetensors } from "../safetensors.js";
import { f32ToBf16 } from "../../testing/half-floats.js";
import { BPE_MERGES, CHATML_TEMPLATE, QWEN2_TEST, byteLevelVocab, writeByteLevelGguf, writeQwen2Checkpoint, writeRawSafetensors } from "../../testing/hf-fixtures.js";
import { convertHfToGguf } from "./hf-convert.js";
import { exportHfCheckpoint } from "./hf-export.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-hf-convert-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const bits = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const tokenizerKeys = (m: Map<string, unknown>): Record<string, unknown> => Object.fromEntries([...m].filter(([k]) => k.startsWith("tokenizer.")));

describe("tiny policy → HF → GGUF", () => {
  it("gives the same tensors bit for bit, the same tokenizer metadata and the same llama keys", () => {
    const policy = ensurePolicy(dir, { seed: 11, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 256 });
    exportHfCheckpoint(policy.path, join(dir, "hf"));
    const res = convertHfToGguf(join(dir, "hf"), join(dir, "back.gguf"));
    expect(res).toMatchObject({ arch: "llama", tensors: 21, tokenizer: "llama", dtypes: { F32: 21 } });
    const a = readGguf(policy.path);
    const b = readGguf(join(dir, "back.gguf"));
    expect(b.tensors.map((t) => t.name)).toEqual(a.tensors.map((t) => t.name));
    a.tensors.forEach((t, i) => {
      expect(b.tensors[i]!.shape).toEqual(t.shape);
      expect(bits(b.tensors[i]!.data).equals(bits(t.data))).toBe(true);
    });
    expect(tokenizerKeys(b.metadata)).toEqual(tokenizerKeys(a.metadata));
    for (const [k, v] of a.metadata) if (k.startsWith("llama.") || k === "general.architecture" || k === "general.name") expect([k, b.metadata.get(k)]).toEqual([k, v]);
    expect(b.metadata.get("general.file_type")).toBe(0);
  });
});

describe("llama HF checkpoint in BF16 → GGUF", () => {
  it("widens BF16 exactly and permutes q/k into llama.cpp's RoPE order", () => {
    const policy = ensurePolicy(dir, { seed: 12, nEmbd: 32, nLayer: 1, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 256 });
    const hf = join(dir, "hf-bf16");
    exportHfCheckpoint(policy.path, hf);
    // Re-store the exported weights as BF16, as most published llama checkpoints are.
    const { tensors } = readSafetensors(join(hf, "model.safetensors"));
    writeRawSafetensors(join(hf, "model.safetensors"), tensors.map((t) => ({ name: t.name, shape: t.shape, dtype: "BF16", data: f32ToBf16(t.data as Float32Array) })));
    const res = convertHfToGguf(hf, join(dir, "bf16.gguf"));
    expect(res.dtypes).toEqual({ BF16: 12 });
    const a = readGguf(policy.path).tensors;
    const b = readGguf(res.path).tensors;
    const rounded = (x: Float32Array): Float32Array => new Float32Array(Uint32Array.from(f32ToBf16(x), (w) => w << 16).buffer);
    // Rounding commutes with the row permutation: the converted tensor is the original, rounded to BF16.
    a.forEach((t, i) => expect(bits(b[i]!.data).equals(bits(rounded(t.data)))).toBe(true));
    expect(a.some((t, i) => !bits(b[i]!.data).equals(bits(t.data)))).toBe(true);
  });
});

describe("byte-level BPE GGUF → HF → GGUF", () => {
  it("keeps the tokenizer metadata: tokens, types, merges, pre-tokenizer type, specials and chat template", () => {
    const path = join(dir, "bpe.gguf");
    writeByteLevelGguf(path);
    exportHfCheckpoint(path, join(dir, "hf-bpe"));
    convertHfToGguf(join(dir, "hf-bpe"), join(dir, "bpe-back.gguf"));
    const a = readGguf(path);
    const b = readGguf(join(dir, "bpe-back.gguf"));
    expect(tokenizerKeys(b.metadata)).toEqual(tokenizerKeys(a.metadata));
    a.tensors.forEach((t, i) => expect(bits(b.tensors[i]!.data).equals(bits(t.data))).toBe(true));
  });
});

describe("qwen2 HF checkpoint → GGUF", () => {
  const { tokens } = byteLevelVocab();
  for (const dtype of ["BF16", "F16"] as const) {
    it(`converts ${dtype} weights exactly, with q/k/v biases, qwen2 keys and the byte-level tokenizer`, () => {
      const src = join(dir, `qwen-${dtype}`);
      const weights = writeQwen2Checkpoint(src, { dtype });
      const out = join(dir, `qwen-${dtype}.gguf`);
      const res = convertHfToGguf(src, out);
      expect(res).toMatchObject({ arch: "qwen2", tokenizer: "gpt2", pre: "qwen2", vocab: tokens.length + 3, dtypes: { [dtype]: weights.size } });
      const g = readGguf(out);
      const m = g.metadata;
      expect(m.get("general.architecture")).toBe("qwen2");
      expect([m.get("qwen2.embedding_length"), m.get("qwen2.block_count"), m.get("qwen2.attention.head_count"), m.get("qwen2.attention.head_count_kv"), m.get("qwen2.feed_forward_length"), m.get("qwen2.context_length")]).toEqual([
        QWEN2_TEST.hidden, QWEN2_TEST.layers, QWEN2_TEST.heads, QWEN2_TEST.kvHeads, QWEN2_TEST.ff, QWEN2_TEST.context,
      ]);
      expect(m.get("qwen2.rope.freq_base")).toBe(1e6);
      expect(m.get("qwen2.attention.layer_norm_rms_epsilon")).toBe(Math.fround(1e-6));
      expect(m.has("llama.vocab_size")).toBe(false);
      // Tied embeddings: no output.weight; q/k are not permuted for qwen2 (NEOX RoPE in llama.cpp).
      const byName = new Map(g.tensors.map((t) => [t.name, t]));
      expect(byName.has("output.weight")).toBe(false);
      expect(g.tensors).toHaveLength(weights.size);
      const pairs: [string, string][] = [
        ["token_embd.weight", "model.embed_tokens.weight"],
        ["blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"],
        ["blk.0.attn_q.bias", "model.layers.0.self_attn.q_proj.bias"],
        ["blk.1.attn_k.bias", "model.layers.1.self_attn.k_proj.bias"],
        ["blk.1.attn_v.bias", "model.layers.1.self_attn.v_proj.bias"],
        ["blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"],
        ["output_norm.weight", "model.norm.weight"],
      ];
      for (const [gn, hn] of pairs) expect(bits(byName.get(gn)!.data).equals(bits(weights.get(hn)!.data))).toBe(true);
      // The tokenizer: the embedding rows beyond the tokenizer are [PAD] slots, as convert_hf_to_gguf.py writes them.
      const ggTokens = m.get("tokenizer.ggml.tokens") as string[];
      expect(ggTokens).toHaveLength(tokens.length + 3);
      expect(ggTokens.slice(tokens.length)).toEqual([`[PAD${tokens.length}]`, `[PAD${tokens.length + 1}]`, `[PAD${tokens.length + 2}]`]);
      expect((m.get("tokenizer.ggml.token_type") as number[]).slice(-6)).toEqual([3, 3, 3, 5, 5, 5]);
      expect(m.get("tokenizer.ggml.merges")).toEqual(BPE_MERGES);
      expect(m.get("tokenizer.ggml.eos_token_id")).toBe(tokens.indexOf("<|im_end|>"));
      expect(m.get("tokenizer.ggml.padding_token_id")).toBe(tokens.indexOf("<|endoftext|>"));
      // generation_config's [<|im_end|>, <|endoftext|>]: the second is the padding token, not an EOT.
      expect(m.has("tokenizer.ggml.eot_token_id")).toBe(false);
      expect(m.has("tokenizer.ggml.bos_token_id")).toBe(true); // config.json's bos_token_id
      expect(m.get("tokenizer.chat_template")).toBe(CHATML_TEMPLATE);
    });
  }

  it("takes add_bos from the post-processor's template when tokenizer_config.json does not say (Llama 3 style)", () => {
    const src = join(dir, "qwen-bos");
    writeQwen2Checkpoint(src, { dtype: "BF16" });
    const bos = "<|endoftext|>";
    const tj = JSON.parse(readFileSync(join(src, "tokenizer.json"), "utf8")) as Record<string, unknown>;
    tj.post_processor = {
      type: "Sequence",
      processors: [
        { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
        { type: "TemplateProcessing", single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }], pair: [], special_tokens: {} },
      ],
    };
    writeFileSync(join(src, "tokenizer.json"), JSON.stringify(tj));
    const tc = JSON.parse(readFileSync(join(src, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(join(src, "tokenizer_config.json"), JSON.stringify({ ...tc, bos_token: bos }));
    const m = readGguf(convertHfToGguf(src, join(dir, "qwen-bos.gguf")).path).metadata;
    expect([m.get("tokenizer.ggml.add_bos_token"), m.get("tokenizer.ggml.add_eos_token")]).toEqual([true, false]);
    writeFileSync(join(src, "tokenizer_config.json"), JSON.stringify({ ...tc, bos_token: bos, add_bos_token: false }));
    expect(readGguf(convertHfToGguf(src, join(dir, "qwen-bos.gguf")).path).metadata.get("tokenizer.ggml.add_bos_token")).toBe(false);
  });

  it("reads a sharded checkpoint (model.safetensors.index.json) into the same GGUF tensors", () => {
    writeQwen2Checkpoint(join(dir, "q1"), { dtype: "BF16", seed: 9 });
    writeQwen2Checkpoint(join(dir, "q3"), { dtype: "BF16", seed: 9, shards: 3 });
    const a = readGguf(convertHfToGguf(join(dir, "q1"), join(dir, "q1.gguf")).path);
    const b = readGguf(convertHfToGguf(join(dir, "q3"), join(dir, "q3.gguf")).path);
    expect(b.tensors.map((t) => t.name)).toEqual(a.tensors.map((t) => t.name));
    a.tensors.forEach((t, i) => expect(bits(b.tensors[i]!.data).equals(bits(t.data))).toBe(true));
  });
});

describe("bad Hugging Face input: one line naming the file and the reason", () => {
  const good = join(dir, "good");
  writeQwen2Checkpoint(good, { dtype: "BF16" });
  let n = 0;
  const variant = (edit: (d: string) => void): string => {
    const d = join(dir, `bad-${n++}`);
    cpSync(good, d, { recursive: true });
    edit(d);
    return d;
  };
  const editJson = (path: string, f: (j: Record<string, unknown>) => void): void => {
    const j = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    f(j);
    writeFileSync(path, JSON.stringify(j));
  };
  const fail = (d: string, message: string | RegExp): void => {
    let err: Error | undefined;
    try {
      convertHfToGguf(d, join(dir, "never.gguf"));
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).toMatch(message);
    expect(err?.message.includes("\n")).toBe(false);
  };

  it("an unsupported model_type", () => {
    const d = variant((d) => editJson(join(d, "config.json"), (j) => (j.model_type = "gemma")));
    fail(d, `${d}/config.json: model_type 'gemma' is not supported (supported: llama, qwen2)`);
  });

  it("missing files: the directory, config.json, tokenizer.json, the weights, a shard", () => {
    fail(join(dir, "nope"), `${join(dir, "nope")}: not a directory (a Hugging Face checkpoint is a directory with config.json)`);
    let d = variant((d) => rmSync(join(d, "config.json")));
    fail(d, `${d}/config.json: missing (a Hugging Face checkpoint needs config.json)`);
    d = variant((d) => rmSync(join(d, "tokenizer.json")));
    fail(d, `${d}/tokenizer.json: missing (the tokenizer is read from tokenizer.json)`);
    d = variant((d) => rmSync(join(d, "model.safetensors")));
    fail(d, `${d}: no model.safetensors or model.safetensors.index.json (only safetensors weights are supported)`);
    const sharded = join(dir, "sharded-missing");
    writeQwen2Checkpoint(sharded, { dtype: "F16", shards: 2 });
    rmSync(join(sharded, "model-00002-of-00002.safetensors"));
    fail(sharded, `${sharded}/model-00002-of-00002.safetensors: missing (listed in model.safetensors.index.json)`);
  });

  it("a dtype other than F32, F16 and BF16, and a quantized checkpoint", () => {
    let d = variant((d) => writeRawSafetensors(join(d, "model.safetensors"), [{ name: "model.norm.weight", shape: [QWEN2_TEST.hidden], dtype: "I32", data: new Int32Array(QWEN2_TEST.hidden) }]));
    fail(d, `${d}/model.safetensors: tensor model.norm.weight has dtype I32; only F32, F16 and BF16 weights are supported`);
    d = variant((d) => writeRawSafetensors(join(d, "model.safetensors"), [{ name: "model.norm.weight", shape: [QWEN2_TEST.hidden], dtype: "F8_E4M3", data: new Uint16Array(QWEN2_TEST.hidden / 2) }]));
    fail(d, `${d}/model.safetensors: tensor model.norm.weight has dtype F8_E4M3; only F32, F16, BF16, I32 and I64 are supported`);
    d = variant((d) => editJson(join(d, "config.json"), (j) => (j.quantization_config = { quant_method: "gptq", bits: 4 })));
    fail(d, `${d}/config.json: a quantized checkpoint (quantization_config.quant_method 'gptq'); only F32, F16 and BF16 weights are supported`);
  });

  it("a tensor of the wrong shape, a missing tensor, an unknown tensor", () => {
    let d = variant((d) => editJson(join(d, "config.json"), (j) => (j.intermediate_size = 40)));
    fail(d, `${d}/model.safetensors: tensor model.layers.0.mlp.gate_proj.weight has shape [48,32], config.json needs [40,32]`);
    d = variant((d) => editJson(join(d, "config.json"), (j) => (j.tie_word_embeddings = false)));
    fail(d, `${d}: tensor lm_head.weight is missing from the safetensors weights (and config.json does not set tie_word_embeddings)`);
    d = variant((d) => editJson(join(d, "config.json"), (j) => (j.num_hidden_layers = 1)));
    fail(d, `${d}/model.safetensors: tensor model.layers.1.input_layernorm.weight is not part of a qwen2 model with this config.json`);
  });

  it("a tokenizer that cannot be converted faithfully", () => {
    let d = variant((d) => editJson(join(d, "tokenizer.json"), (j) => ((j.pre_tokenizer as { pretokenizers: { pattern: { Regex: string } }[] }).pretokenizers[0]!.pattern.Regex = "\\s+|\\w+")));
    fail(d, `${d}/tokenizer.json: cannot tell llama.cpp's pre-tokenizer type of this byte-level BPE tokenizer (split regex "\\\\s+|\\\\w+"); known: qwen2, llama-bpe, gpt2`);
    d = variant((d) => editJson(join(d, "tokenizer.json"), (j) => ((j.model as Record<string, unknown>).type = "Unigram")));
    fail(d, `${d}/tokenizer.json: tokenizer model type 'Unigram' is not supported (BPE, byte-level or with byte_fallback, is)`);
    d = variant((d) => editJson(join(d, "config.json"), (j) => (j.vocab_size = 100)));
    fail(d, /tokenizer\.json: token '.*' has id 100, beyond config.json vocab_size 100|model\.embed_tokens\.weight has shape/);
    d = variant((d) => editJson(join(d, "config.json"), (j) => (j.rope_scaling = { type: "yarn", factor: 4 })));
    fail(d, `${d}/config.json: rope_scaling {"type":"yarn","factor":4} is not supported (plain RoPE only)`);
    // A vocabulary llama.cpp could not load as written (an empty piece): the GGUF tokenizer check, naming the checkpoint.
    d = variant((d) =>
      editJson(join(d, "tokenizer.json"), (j) => {
        const vocab = (j.model as { vocab: Record<string, number> }).vocab;
        const [piece, id] = Object.entries(vocab).at(-1)!;
        delete vocab[piece];
        vocab[""] = id;
      }),
    );
    fail(d, new RegExp(`^${d.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: tokenizer\\.tokens\\[\\d+\\]: empty piece$`));
  });
});
