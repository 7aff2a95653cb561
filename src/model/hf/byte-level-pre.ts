// Byte-level BPE pre-tokenizers by llama.cpp's `tokenizer.ggml.pre` name: the Hugging Face
// tokenizer.json pieces that split text before BPE, for the pre-tokenizer types whose splitting we can
// tell from tokenizer.json alone. convert_hf_to_gguf.py names the type by hashing a tokenization of a
// probe text (it runs transformers); here the split regex is matched instead, so a tokenizer whose
// regex is not in this table is refused by name rather than guessed.

/** The HF pieces of one pre-tokenizer type. */
export interface ByteLevelPre {
  /** llama.cpp `tokenizer.ggml.pre`. */
  name: string;
  normalizer: unknown;
  preTokenizer: unknown;
  /** BPE model flag: Llama 3 looks whole words up before merging. */
  ignoreMerges: boolean;
  /** Split regexes that name this type when found in a tokenizer.json. */
  regexes: readonly string[];
}

const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const GPT2_REGEX = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function splitThenBytes(regex: string): unknown {
  return {
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    ],
  };
}

/** The pre-tokenizer types this module can write and recognise. */
export const BYTE_LEVEL_PRES: readonly ByteLevelPre[] = [
  // Qwen2's own tokenizer.json normalizes to NFC, but llama.cpp does not: an exported tokenizer.json
  // must give the engine's ids (a compatibility ideograph is its own bytes there), so it has none.
  { name: "qwen2", normalizer: null, preTokenizer: splitThenBytes(QWEN2_REGEX), ignoreMerges: false, regexes: [QWEN2_REGEX] },
  { name: "llama-bpe", normalizer: null, preTokenizer: splitThenBytes(LLAMA3_REGEX), ignoreMerges: true, regexes: [LLAMA3_REGEX] },
  // GPT-2's own: the ByteLevel pre-tokenizer applies GPT-2's regex itself (or a Split spells it out).
  {
    name: "gpt2",
    normalizer: null,
    preTokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    ignoreMerges: false,
    regexes: [GPT2_REGEX],
  },
];

/** The pre-tokenizer of a `tokenizer.ggml.pre` name; throws naming the known ones. */
export function byteLevelPre(name: string, source: string): ByteLevelPre {
  const pre = BYTE_LEVEL_PRES.find((p) => p.name === name);
  if (!pre) {
    throw new Error(`${source}: byte-level pre-tokenizer '${name}' (tokenizer.ggml.pre) is not supported (known: ${BYTE_LEVEL_PRES.map((p) => p.name).join(", ")})`);
  }
  return pre;
}

/**
 * The `tokenizer.ggml.pre` name of a tokenizer.json's pre-tokenizer: the Split regex (or GPT-2's
 * ByteLevel with its built-in regex) matched against the table. Throws naming the regex otherwise.
 */
export function detectByteLevelPre(preTokenizer: unknown, source: string): string {
  const regexes: string[] = [];
  let builtIn = false;
  const walk = (p: unknown): void => {
    if (typeof p !== "object" || p === null) return;
    const o = p as { type?: unknown; pretokenizers?: unknown; pattern?: { Regex?: unknown }; use_regex?: unknown };
    if (o.type === "Sequence" && Array.isArray(o.pretokenizers)) o.pretokenizers.forEach(walk);
    else if (o.type === "Split" && typeof o.pattern?.Regex === "string") regexes.push(o.pattern.Regex);
    else if (o.type === "ByteLevel" && o.use_regex === true) builtIn = true;
  };
  walk(preTokenizer);
  if (regexes.length === 0 && builtIn) return "gpt2";
  if (regexes.length === 1) {
    const found = BYTE_LEVEL_PRES.find((p) => p.regexes.includes(regexes[0] as string));
    if (found) return found.name;
  }
  const what = regexes.length > 0 ? `split regex ${JSON.stringify(regexes.join(" | "))}` : `pre_tokenizer ${JSON.stringify(preTokenizer)}`;
  throw new Error(`${source}: cannot tell llama.cpp's pre-tokenizer type of this byte-level BPE tokenizer (${what}); known: ${BYTE_LEVEL_PRES.map((p) => p.name).join(", ")}`);
}
