// Export of a llama GGUF as a Hugging Face checkpoint: the files and their fields, the RoPE row order,
// Arbor's chat template as Jinja rendering what renderChat renders, byte-level BPE vocabularies, and the
// one-line errors for GGUFs that cannot be exported.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { afterAll, describe, expect, it } from "vitest";
import type { ChatMessage } from "../../core/types.js";
import { renderChat, type ChatToolSpec } from "../chat-template.js";
import { readGguf, writeGgufRaw } from "../gguf.js";
import { ensurePolicy } from "../policy.js";
import { readSafetensors } from "../safetensors.js";
import { Vocab } from "../vocab.js";
import { BPE_MERGES, BPE_SPECIALS, CHATML_TEMPLATE, writeByteLevelGguf } from "../../testing/hf-fixtures.js";
import { ARBOR_CHAT_TEMPLATE } from "./arbor-jinja-template.js";
import { BYTE_LEVEL_PRES, detectByteLevelPre } from "./byte-level-pre.js";
import { exportHfCheckpoint } from "./hf-export.js";
import { permuteRopeRows, unpermuteRopeRows } from "./hf-tensors.js";
import { spmMerges } from "./spm-merges.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-hf-export-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const init = { seed: 3, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 64, contextLength: 256 };
const json = (path: string): Record<string, unknown> => JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;

describe("HF export of the tiny policy", () => {
  const policy = ensurePolicy(dir, init);
  const out = join(dir, "hf");
  const result = exportHfCheckpoint(policy.path, out);

  it("writes config.json as a LlamaForCausalLM with the policy's shape", () => {
    expect(result).toMatchObject({ tensors: 21, tiedEmbeddings: false });
    for (const f of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]) expect(existsSync(join(out, f))).toBe(true);
    expect(json(join(out, "config.json"))).toMatchObject({
      architectures: ["LlamaForCausalLM"],
      model_type: "llama",
      hidden_size: 32,
      intermediate_size: 64,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      max_position_embeddings: 256,
      vocab_size: new Vocab().size,
      bos_token_id: 1,
      eos_token_id: 2,
      tie_word_embeddings: false,
      torch_dtype: "float32",
    });
    expect(json(join(out, "generation_config.json"))).toEqual({ bos_token_id: 1, eos_token_id: [2, new Vocab().controlId("<|end|>")] });
  });

  it("writes the weights under HF names, q/k rows in HF's RoPE order, everything else as stored", () => {
    const gguf = new Map(readGguf(policy.path).tensors.map((t) => [t.name, t]));
    const { tensors, metadata } = readSafetensors(join(out, "model.safetensors"));
    expect(metadata).toEqual({ format: "pt" });
    const hf = new Map(tensors.map((t) => [t.name, t]));
    expect([...hf.keys()].slice(0, 3)).toEqual(["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight"]);
    expect(hf.get("lm_head.weight")!.data).toEqual(gguf.get("output.weight")!.data);
    expect(hf.get("model.layers.1.mlp.down_proj.weight")!.data).toEqual(gguf.get("blk.1.ffn_down.weight")!.data);
    const q = hf.get("model.layers.0.self_attn.q_proj.weight")!;
    const k = hf.get("model.layers.0.self_attn.k_proj.weight")!;
    expect(q.data).not.toEqual(gguf.get("blk.0.attn_q.weight")!.data);
    expect(permuteRopeRows(q as never, 4).data).toEqual(gguf.get("blk.0.attn_q.weight")!.data);
    expect(permuteRopeRows(k as never, 2).data).toEqual(gguf.get("blk.0.attn_k.weight")!.data);
  });

  it("writes a Llama-2-style byte-fallback tokenizer.json and a tokenizer_config with Arbor's template", () => {
    const vocab = new Vocab();
    const tj = json(join(out, "tokenizer.json")) as { model: { type: string; byte_fallback: boolean; vocab: Record<string, number>; merges: string[]; unk_token: string }; added_tokens: { id: number; content: string; special: boolean }[]; normalizer: unknown; decoder: { decoders: { type: string }[] } };
    expect(tj.model).toMatchObject({ type: "BPE", byte_fallback: true, unk_token: "<unk>", fuse_unk: true });
    expect(Object.keys(tj.model.vocab)).toHaveLength(vocab.size);
    expect(tj.model.vocab["<0x0A>"]).toBe(3 + 10);
    expect(tj.model.vocab["\u2581"]).toBe(259);
    // Every piece of Arbor's vocabulary is one character or a special: no two pieces join into a third.
    expect(tj.model.merges).toEqual([]);
    expect(tj.added_tokens.map((a) => a.content)).toEqual(["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>", "<|tool_call|>", "<|/tool_call|>"]);
    expect(tj.added_tokens.every((a) => a.special)).toBe(true);
    // add_space_prefix is false in Arbor's GGUF: spaces become ▁, nothing is prepended or stripped.
    expect(tj.normalizer).toEqual({ type: "Sequence", normalizers: [{ type: "Replace", pattern: { String: " " }, content: "\u2581" }] });
    expect(tj.decoder.decoders.map((d) => d.type)).toEqual(["Replace", "ByteFallback", "Fuse"]);
    const tc = json(join(out, "tokenizer_config.json"));
    expect(tc).toMatchObject({ bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>", pad_token: null, add_bos_token: true, add_eos_token: false, chat_template: ARBOR_CHAT_TEMPLATE, model_max_length: 256 });
  });

  it("Arbor's Jinja template renders exactly the pieces renderChat emits (checked with @huggingface/jinja)", () => {
    const vocab = new Vocab();
    const tpl = new Template(json(join(out, "tokenizer_config.json")).chat_template as string);
    const tools: ChatToolSpec[] = [
      { name: "calc", description: "evaluate an arithmetic expression", parameters: { type: "object", properties: { expr: { type: "string" } }, required: ["expr"] } },
      { name: "noop" },
    ];
    const conversations: { messages: ChatMessage[]; tools?: ChatToolSpec[]; gen: boolean }[] = [
      { messages: [{ role: "user", content: "What is 2+3?" }], gen: true },
      { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "héllo\nwörld ▁" }], gen: false },
      {
        messages: [
          { role: "user", content: "compute 17*3" },
          { role: "assistant", content: 'I will call <|tool_call|>calc {"expr":"17*3"}<|/tool_call|>' },
          { role: "tool", content: "51", name: "calc" },
          { role: "assistant", content: "51" },
          { role: "user", content: "thanks" },
        ],
        tools,
        gen: true,
      },
    ];
    for (const c of conversations) {
      const ids = renderChat(c.messages, (t) => vocab.encode(t), vocab, { addGenerationPrompt: c.gen, ...(c.tools ? { tools: c.tools } : {}) });
      const text = tpl.render({
        messages: c.messages,
        bos_token: "<s>",
        eos_token: "</s>",
        add_generation_prompt: c.gen,
        ...(c.tools ? { tools: c.tools.map((f) => ({ type: "function", function: f })) } : {}),
      });
      // Token ids as llama.cpp (parse_special) or a HF tokenizer reads the text: the special tokens'
      // text becomes their ids, the rest is plain text. Equal to renderChat's ids, except that with tools
      // the instructions' literal markers become control tokens (ARBOR_CHAT_TEMPLATE's header says why).
      const read = encodeSpecial(text, vocab);
      if (!c.tools) expect(read).toEqual(ids);
      else expect(decodeRuns(read, vocab)).toBe(decodeRuns(ids, vocab));
      expect(decodeRuns(read, vocab)).toBe(text.replaceAll("\u2581", " "));
    }
  });

  it("refuses a role the template does not know, as renderChat does", () => {
    const tpl = new Template(ARBOR_CHAT_TEMPLATE);
    expect(() => tpl.render({ messages: [{ role: "robot", content: "x" }], bos_token: "<s>" })).toThrow(/unknown role robot/);
  });
});

/** Ids of `text` with special-token text read as the special tokens (BOS, EOS and the control markers). */
function encodeSpecial(text: string, vocab: Vocab): number[] {
  const specials = vocab.pieces.filter((_, id) => vocab.isControl(id));
  const ids: number[] = [];
  let plain = "";
  for (let i = 0; i < text.length; ) {
    const hit = specials.find((sp) => text.startsWith(sp, i));
    if (hit === undefined) {
      plain += text[i];
      i++;
      continue;
    }
    ids.push(...vocab.encode(plain), vocab.pieces.indexOf(hit));
    plain = "";
    i += hit.length;
  }
  return [...ids, ...vocab.encode(plain)];
}

/** Text of ids with control tokens (BOS included) written as their pieces. */
function decodeRuns(ids: readonly number[], vocab: Vocab): string {
  let out = "";
  let run: number[] = [];
  for (const id of ids) {
    if (!vocab.isControl(id)) {
      run.push(id);
      continue;
    }
    out += vocab.decode(run) + vocab.pieces[id];
    run = [];
  }
  return out + vocab.decode(run);
}

describe("HF export of a byte-level BPE GGUF", () => {
  it("writes the GGUF's merges, Qwen2's pre-tokenizer and the specials as added tokens outside the BPE vocabulary", () => {
    const path = join(dir, "bpe.gguf");
    const { tokens } = writeByteLevelGguf(path);
    const out = join(dir, "hf-bpe");
    exportHfCheckpoint(path, out);
    const tj = json(join(out, "tokenizer.json")) as { model: Record<string, unknown> & { vocab: Record<string, number> }; added_tokens: { id: number; content: string; special: boolean }[]; pre_tokenizer: { type: string; pretokenizers: { type: string }[] }; normalizer: unknown };
    expect(tj.model).toMatchObject({ type: "BPE", byte_fallback: false, merges: BPE_MERGES, ignore_merges: false });
    expect(Object.keys(tj.model.vocab)).toHaveLength(tokens.length - BPE_SPECIALS.length);
    expect(tj.model.vocab["Ġthe"]).toBe(tokens.indexOf("Ġthe"));
    expect(tj.added_tokens.map((a) => [a.id, a.content, a.special])).toEqual(BPE_SPECIALS.map((s) => [tokens.indexOf(s), s, true]));
    // No NFC (Qwen2's tokenizer.json has one): llama.cpp does not normalize, and the export gives its ids.
    expect(tj.normalizer).toBeNull();
    expect(tj.pre_tokenizer.pretokenizers.map((p) => p.type)).toEqual(["Split", "ByteLevel"]);
    const tc = json(join(out, "tokenizer_config.json"));
    expect(tc).toMatchObject({ chat_template: CHATML_TEMPLATE, eos_token: "<|im_end|>", bos_token: "<|endoftext|>", pad_token: "<|endoftext|>", add_bos_token: false, tokenizer_class: "PreTrainedTokenizerFast" });
    expect(json(join(out, "config.json"))).toMatchObject({ eos_token_id: tokens.indexOf("<|im_end|>"), pad_token_id: tokens.indexOf("<|endoftext|>") });
  });

  it("names an unknown pre-tokenizer type rather than guessing one", () => {
    const path = join(dir, "bpe-odd.gguf");
    writeByteLevelGguf(path, { pre: "falcon" });
    expect(() => exportHfCheckpoint(path, join(dir, "hf-odd"))).toThrow(`${path}: byte-level pre-tokenizer 'falcon' (tokenizer.ggml.pre) is not supported (known: qwen2, llama-bpe, gpt2)`);
  });
});

describe("HF export errors", () => {
  it("names the file and the architecture of a non-llama GGUF", () => {
    const path = join(dir, "qwen.gguf");
    writeGgufRaw(path, [["general.architecture", { type: "string", value: "qwen2" }], ["general.alignment", { type: "u32", value: 32 }]], []);
    expect(() => exportHfCheckpoint(path, join(dir, "x"))).toThrow(`${path}: GGUF architecture 'qwen2' is not supported here (Arbor's trainer and HF export run 'llama' only)`);
  });

  it("names a missing or misshapen tensor", () => {
    const src = readGguf(ensurePolicy(dir, init).path);
    const meta = [...src.metadata].filter(([k]) => !k.startsWith("tokenizer.") && !k.startsWith("arbor.") && k !== "general.name");
    const typed = meta.map(([k, v]): [string, never] => [k, (typeof v === "string" ? { type: "string", value: v } : Number.isInteger(v) ? { type: "u32", value: v } : { type: "f32", value: v }) as never]);
    const tok: [string, never][] = [
      ["tokenizer.ggml.model", { type: "string", value: "llama" } as never],
      ["tokenizer.ggml.tokens", { type: "array", elem: "string", value: src.metadata.get("tokenizer.ggml.tokens") } as never],
      ["tokenizer.ggml.token_type", { type: "array", elem: "i32", value: src.metadata.get("tokenizer.ggml.token_type") } as never],
    ];
    const path = join(dir, "missing.gguf");
    writeGgufRaw(path, [...typed, ...tok], src.tensors.filter((t) => t.name !== "blk.1.ffn_up.weight"));
    expect(() => exportHfCheckpoint(path, join(dir, "x"))).toThrow(`${path}: tensor blk.1.ffn_up.weight is missing`);
    const bad = src.tensors.map((t) => (t.name === "blk.0.attn_k.weight" ? { ...t, shape: [32, 16], data: t.data.slice(0, 512) } : t));
    writeGgufRaw(path, [...typed, ...tok], bad);
    expect(() => exportHfCheckpoint(path, join(dir, "x"))).toThrow(`${path}: tensor blk.0.attn_k.weight has shape [32,16], the model's config needs [16,32]`);
  });
});

describe("RoPE permutation and SPM merges", () => {
  it("permutes q/k rows as convert_hf_to_gguf.py's LlamaModel.permute (numpy reshape/swapaxes) and back", () => {
    const t = { name: "q", shape: [16, 2], data: Float32Array.from({ length: 32 }, (_, i) => i) };
    const rows = (x: Float32Array): number[] => Array.from({ length: 16 }, (_, r) => (x[r * 2] as number) / 2);
    // numpy: w.reshape(2, 2, 4, 2).swapaxes(1, 2).reshape(16, 2) rows
    expect(rows(permuteRopeRows(t, 2).data)).toEqual([0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]);
    expect(unpermuteRopeRows(permuteRopeRows(t, 2), 2).data).toEqual(t.data);
    expect(() => permuteRopeRows({ name: "k", shape: [6, 1], data: new Float32Array(6) }, 2)).toThrow(/6 rows do not split into 2 heads of even size/);
  });

  it("derives merges as transformers' generate_merges: splits by part ids, then by score and part lengths, stable", () => {
    const pieces = ["<unk>", "a", "b", "c", "ab", "bc", "abc", "ca", "é", "éa"];
    const scores = [0, -1, -2, -3, -4, -5, -6, -4, -7, -8];
    // abc splits as (a, bc) and (ab, c); ordered by the left part's id: a(1) < ab(4).
    expect(spmMerges(pieces, scores)).toEqual([
      ["a", "b"], // ab  -4
      ["c", "a"], // ca  -4 (same score and lengths: vocabulary order kept)
      ["b", "c"], // bc  -5
      ["ab", "c"], // abc -6: longer left part first
      ["a", "bc"],
      ["é", "a"], // éa  -8 (lengths in code points)
    ]);
  });
});

describe("byte-level pre-tokenizer types", () => {
  it("are told from the split regex, and each type written is recognised again", () => {
    for (const p of BYTE_LEVEL_PRES) expect(detectByteLevelPre(p.preTokenizer, "t.json")).toBe(p.name);
    const gpt2Split = { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" }, behavior: "Isolated", invert: false }, { type: "ByteLevel", use_regex: false }] };
    expect(detectByteLevelPre(gpt2Split, "t.json")).toBe("gpt2");
    expect(() => detectByteLevelPre({ type: "Whitespace" }, "t.json")).toThrow(`t.json: cannot tell llama.cpp's pre-tokenizer type of this byte-level BPE tokenizer (pre_tokenizer {"type":"Whitespace"}); known: qwen2, llama-bpe, gpt2`);
  });
});
