// Test fixture: a small llama-architecture GGUF that is NOT Arbor's policy — Arbor's SPM pieces plus
// ChatML's special tokens `<|im_start|>`/`<|im_end|>` (CONTROL, as in Qwen's GGUFs), no BOS added,
// and a ChatML chat template with tools (Qwen2.5-like) in `tokenizer.chat_template`. The engine must
// serve it with llama.cpp's tokenizer, that template and `<|im_end|>` as its stop token. One place
// for the fixture, so the made-here BPE/SPM models (src/model/made/) can replace it later.
import type { MetaValue } from "../model/gguf.js";
import { writeGgufRaw } from "../model/gguf.js";
import { tinyConfig, type TinyLlamaConfig } from "../model/config.js";
import { Vocab } from "../model/vocab.js";
import { initWeights } from "../model/weights.js";
import { Rng } from "../core/rng.js";

/** A ChatML template with tools, written the way Qwen2.5-Instruct's is (shortened, same markup). */
export const CHATML_TOOLS_TEMPLATE = [
  "{%- if tools %}",
  "{{- '<|im_start|>system\\n' }}",
  "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
  '{{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n<tools>" }}',
  "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}",
  '{{- "\\n</tools>\\n\\nFor each function call, return a json object within <tool_call></tool_call> XML tags.<|im_end|>\\n" }}',
  "{%- elif messages[0].role == 'system' %}",
  "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
  "{%- endif %}",
  "{%- for message in messages %}",
  "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}",
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  "{%- elif message.role == 'assistant' %}",
  "{{- '<|im_start|>assistant' }}",
  "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}",
  "{%- for tool_call in message.tool_calls %}",
  "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}",
  "{{- '\\n<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' + (tool_call.arguments | tojson) + '}\\n</tool_call>' }}",
  "{%- endfor %}",
  "{{- '<|im_end|>\\n' }}",
  "{%- elif message.role == 'tool' %}",
  "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}",
  "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
  "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}",
  "{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join("\n");

export const CHATML_SPECIALS = ["<|im_start|>", "<|im_end|>"] as const;

export interface ChatmlModel {
  path: string;
  config: TinyLlamaConfig;
  /** The GGUF's pieces in id order (Arbor's, then the ChatML specials). */
  pieces: string[];
  /** Id of `<|im_start|>` / `<|im_end|>`. */
  imStart: number;
  imEnd: number;
}

export interface ChatmlModelOptions {
  seed?: number;
  contextLength?: number;
  /** Replaces the template (e.g. one that fails to render). */
  chatTemplate?: string | null;
  /** Replaces `general.architecture` (e.g. one llama.cpp cannot run). */
  architecture?: string;
}

/**
 * Write the ChatML test model to `path`: a tiny llama (1 layer, 32 wide) with seeded weights. Its
 * `<|im_end|>` is neither EOS nor EOT in the metadata: llama.cpp finds it as an end-of-generation
 * token by its text, as it does in real Qwen GGUFs whose EOT is not set.
 */
export function writeChatmlModel(path: string, opts: ChatmlModelOptions = {}): ChatmlModel {
  const vocab = new Vocab();
  const pieces = [...vocab.pieces, ...CHATML_SPECIALS];
  const types = [...vocab.types, 3, 3];
  const scores = pieces.map(() => 0);
  const contextLength = opts.contextLength ?? 1024;
  const config = tinyConfig({ nVocab: pieces.length, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength });
  const arch = opts.architecture ?? "llama";
  const meta: [string, MetaValue][] = [
    ["general.architecture", { type: "string", value: arch }],
    ["general.alignment", { type: "u32", value: 32 }],
    ["general.name", { type: "string", value: "arbor-test-chatml" }],
    [`${arch}.vocab_size`, { type: "u32", value: config.nVocab }],
    [`${arch}.context_length`, { type: "u32", value: config.contextLength }],
    [`${arch}.embedding_length`, { type: "u32", value: config.nEmbd }],
    [`${arch}.block_count`, { type: "u32", value: config.nLayer }],
    [`${arch}.feed_forward_length`, { type: "u32", value: config.nFf }],
    [`${arch}.attention.head_count`, { type: "u32", value: config.nHead }],
    [`${arch}.attention.head_count_kv`, { type: "u32", value: config.nHeadKv }],
    [`${arch}.rope.dimension_count`, { type: "u32", value: config.nEmbd / config.nHead }],
    [`${arch}.attention.layer_norm_rms_epsilon`, { type: "f32", value: config.rmsEps }],
    [`${arch}.rope.freq_base`, { type: "f32", value: config.ropeFreqBase }],
    ["tokenizer.ggml.model", { type: "string", value: "llama" }],
    ["tokenizer.ggml.tokens", { type: "array", elem: "string", value: pieces }],
    ["tokenizer.ggml.scores", { type: "array", elem: "f32", value: scores }],
    ["tokenizer.ggml.token_type", { type: "array", elem: "i32", value: types }],
    ["tokenizer.ggml.unknown_token_id", { type: "u32", value: vocab.unkId }],
    ["tokenizer.ggml.bos_token_id", { type: "u32", value: vocab.bosId }],
    ["tokenizer.ggml.eos_token_id", { type: "u32", value: vocab.eosId }],
    ["tokenizer.ggml.add_space_prefix", { type: "bool", value: false }],
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: false }],
    ["tokenizer.ggml.add_eos_token", { type: "bool", value: false }],
  ];
  const template = opts.chatTemplate === undefined ? CHATML_TOOLS_TEMPLATE : opts.chatTemplate;
  if (template !== null) meta.push(["tokenizer.chat_template", { type: "string", value: template }]);
  writeGgufRaw(path, meta, initWeights(config, new Rng(opts.seed ?? 5)));
  return { path, config, pieces, imStart: vocab.size, imEnd: vocab.size + 1 };
}
