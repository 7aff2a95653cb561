// GGUF v3 checkpoint I/O: the file llama.cpp executes. Writes the llama architecture keys, the SPM
// vocabulary and F32 tensors (layout and exact key types as verified in docs/references.md §L); reads
// any GGUF's metadata and its F32, F16 and BF16 tensors back (as float32), naming quantized types.

import { closeSync, fstatSync, openSync } from "node:fs";
import { endianness } from "node:os";
import { writeFileAtomic } from "./atomic-file.js";
import { bf16ToF32, f16ToF32 } from "./half-float.js";
import { readAt } from "./read-at.js";
import { validateConfig, type TinyLlamaConfig } from "./config.js";
import type { MetaValue } from "./gguf-meta.js";
import { tokenizerMetadata, type GgufTokenizerSpec } from "./gguf-tokenizer.js";
import type { Vocab } from "./vocab.js";
import { checkTensors, numel, type Tensor } from "./weights.js";

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
const ALIGNMENT = 32;
const GGML_TYPE_F32 = 0;
const GGML_TYPE_F16 = 1;
const GGML_TYPE_BF16 = 30;

/** ggml tensor type names by id (ggml.h `enum ggml_type`), to name a type this reader refuses. */
const GGML_TYPE_NAMES: Record<number, string> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K",
  12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
  20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
  29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
};

/** Name of a ggml tensor type id (e.g. 12 → "Q4_K"), or "type N" for an id ggml does not define. */
export function ggmlTypeName(type: number): string {
  return GGML_TYPE_NAMES[type] ?? `type ${type}`;
}

/** GGUF metadata value types. */
export const GgufType = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;

export type { MetaValue } from "./gguf-meta.js";

export interface WriteGgufInput {
  config: TinyLlamaConfig;
  /** Arbor's vocabulary (the tiny policy's); give this or `tokenizer`. */
  vocab?: Vocab;
  /** Any SPM or BPE tokenizer (made-here or read from another GGUF); give this or `vocab`. */
  tokenizer?: GgufTokenizerSpec;
  /** `tokenizer.chat_template`; overrides the tokenizer spec's. */
  chatTemplate?: string;
  tensors: Tensor[];
  /**
   * Extra keys. `general.name` is a string; `arbor.policy_version` must be a u32. Other numbers are
   * stored as u32 (non-negative integers), i32 (negative integers) or f64; strings as strings.
   */
  metadata?: Record<string, string | number>;
}

export interface GgufFile {
  version: number;
  /** Keys in file order; u64/i64 values are numbers when safe, else bigint; arrays are JS arrays. */
  metadata: Map<string, unknown>;
  tensors: Tensor[];
}

const RESERVED_PREFIXES = ["llama.", "tokenizer.", "general.architecture", "general.alignment"];

/**
 * Write a llama-architecture GGUF v3 file (F32 tensors). The file is written next to `path` under a
 * temporary name and renamed into place, so readers never see a partial file.
 */
export function writeGguf(path: string, input: WriteGgufInput): void {
  assertLittleEndian();
  const { config: cfg, tensors } = input;
  validateConfig(cfg);
  if ((input.vocab === undefined) === (input.tokenizer === undefined)) throw new RangeError("writeGguf: give exactly one of vocab and tokenizer");
  let spec = input.tokenizer ?? vocabTokenizerSpec(input.vocab as Vocab);
  if (input.chatTemplate !== undefined) spec = { ...spec, chatTemplate: input.chatTemplate };
  if (spec.tokens.length !== cfg.nVocab) throw new RangeError(`config.nVocab (${cfg.nVocab}) != vocabulary size (${spec.tokens.length})`);
  checkTensors(cfg, tensors);

  const meta: [string, MetaValue][] = [
    ["general.architecture", { type: "string", value: "llama" }],
    ["general.alignment", { type: "u32", value: ALIGNMENT }],
    ["general.name", { type: "string", value: "arbor-tiny-llama" }],
    ["llama.vocab_size", { type: "u32", value: cfg.nVocab }],
    ["llama.context_length", { type: "u32", value: cfg.contextLength }],
    ["llama.embedding_length", { type: "u32", value: cfg.nEmbd }],
    ["llama.block_count", { type: "u32", value: cfg.nLayer }],
    ["llama.feed_forward_length", { type: "u32", value: cfg.nFf }],
    ["llama.attention.head_count", { type: "u32", value: cfg.nHead }],
    ["llama.attention.head_count_kv", { type: "u32", value: cfg.nHeadKv }],
    ["llama.rope.dimension_count", { type: "u32", value: cfg.nEmbd / cfg.nHead }],
    ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: cfg.rmsEps }],
    ["llama.rope.freq_base", { type: "f32", value: cfg.ropeFreqBase }],
    ...tokenizerMetadata(spec),
  ];
  for (const [key, value] of Object.entries(input.metadata ?? {})) {
    const entry = extraMeta(key, value);
    const at = meta.findIndex(([k]) => k === key);
    if (at >= 0) meta[at] = [key, entry];
    else meta.push([key, entry]);
  }

  writeGgufRaw(path, meta, tensors);
}

/**
 * Arbor's vocabulary as a GGUF tokenizer: SPM, no space prefix, BOS added, `<|end|>` as EOT. Its
 * keys come out in the order the tiny policy's files have always had, so they stay byte-identical.
 */
export function vocabTokenizerSpec(vocab: Vocab): GgufTokenizerSpec {
  return {
    model: "llama",
    tokens: vocab.pieces,
    scores: vocab.scores,
    types: vocab.types,
    unkId: vocab.unkId,
    bosId: vocab.bosId,
    eosId: vocab.eosId,
    eotId: vocab.controlId("<|end|>"),
    addSpacePrefix: false,
    addBos: true,
    addEos: false,
  };
}

/**
 * Write a GGUF v3 file from typed metadata (in order; `general.alignment` should be 32) and F32
 * tensors, atomically (a temporary name renamed into place). The layer under {@link writeGguf}
 * for files whose architecture or tokenizer is not the tiny policy's.
 */
export function writeGgufRaw(path: string, meta: readonly [string, MetaValue][], tensors: readonly Tensor[]): void {
  assertLittleEndian();
  const seen = new Set<string>();
  for (const [key] of meta) {
    if (seen.has(key)) throw new RangeError(`metadata ${key}: appears twice`);
    seen.add(key);
  }
  const head = new ByteWriter();
  head.u32(GGUF_MAGIC);
  head.u32(GGUF_VERSION);
  head.u64(tensors.length);
  head.u64(meta.length);
  for (const [key, value] of meta) {
    head.str(key);
    writeMetaValue(head, value);
  }
  let offset = 0;
  for (const t of tensors) {
    head.str(t.name);
    head.u32(t.shape.length);
    for (let i = t.shape.length - 1; i >= 0; i--) head.u64(t.shape[i] as number); // ggml order: fastest first
    head.u32(GGML_TYPE_F32);
    head.u64(offset);
    offset += alignUp(t.data.byteLength, ALIGNMENT);
  }
  const header = head.finish();

  writeFileAtomic(path, (put) => {
    put(header);
    put(new Uint8Array(alignUp(header.byteLength, ALIGNMENT) - header.byteLength));
    for (const t of tensors) {
      put(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      put(new Uint8Array(alignUp(t.data.byteLength, ALIGNMENT) - t.data.byteLength));
    }
  });
}

/**
 * Read a GGUF file (v2 or v3): all metadata, and its tensors as float32. F32 tensors come back bit for
 * bit, F16 and BF16 ones widened exactly; a quantized tensor (Q4_K, Q8_0, …) is an error naming the
 * file, the tensor and its ggml type, since Arbor's trainer and exporters work on full-precision weights.
 */
export function readGguf(path: string): GgufFile {
  assertLittleEndian();
  // Read through a file descriptor: the header from a prefix of the file (grown until it holds the
  // whole header), then each tensor at its offset, so files over readFileSync's 2 GiB load too.
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    for (let prefix = Math.min(size, 1 << 23); ; prefix = Math.min(size, prefix * 4)) {
      try {
        return readGgufFrom(fd, path, size, Buffer.from(readAt(fd, 0, prefix)));
      } catch (err) {
        if (!(err instanceof NeedMoreHeader) || prefix >= size) throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** The header ran past the prefix read so far (but not past the file): read a longer prefix. */
class NeedMoreHeader extends Error {}

/**
 * Read only a GGUF's metadata, whatever its tensor types (quantized models too) and without their
 * data: the tokenizer and chat template of a downloaded model, or its architecture to refuse it.
 */
export function readGgufMetadata(path: string): { version: number; metadata: Map<string, unknown> } {
  assertLittleEndian();
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    for (let prefix = Math.min(size, 1 << 22); ; prefix = Math.min(size, prefix * 4)) {
      try {
        const { version, metadata } = readHeader(new ByteReader(Buffer.from(readAt(fd, 0, prefix)), path, size));
        return { version, metadata };
      } catch (err) {
        if (!(err instanceof NeedMoreHeader) || prefix >= size) throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** Magic, version, tensor count and metadata of a GGUF header; leaves `r` after the metadata. */
function readHeader(r: ByteReader): { version: number; nTensors: number; metadata: Map<string, unknown> } {
  const path = r.path;
  const magic = r.u32();
  if (magic !== GGUF_MAGIC) {
    throw new Error(`${path}: not a GGUF file (magic 0x${magic.toString(16).padStart(8, "0")}, want "GGUF")`);
  }
  const version = r.u32();
  if (version !== 2 && version !== 3) throw new Error(`${path}: unsupported GGUF version ${version} (need 2 or 3)`);
  const nTensors = r.count("tensor count");
  const nMeta = r.count("metadata count");
  const metadata = new Map<string, unknown>();
  for (let i = 0; i < nMeta; i++) {
    const key = r.str();
    metadata.set(key, readMetaValue(r, r.u32(), key));
  }
  return { version, nTensors, metadata };
}

function readGgufFrom(fd: number, path: string, fileSize: number, head: Buffer): GgufFile {
  const r = new ByteReader(head, path, fileSize);
  const { version, nTensors, metadata } = readHeader(r);
  const infos: { name: string; dims: number[]; type: number; offset: number }[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = r.str();
    const nDims = r.u32();
    if (nDims < 1 || nDims > 4) throw new Error(`${path}: tensor ${name} has ${nDims} dims (ggml allows 1-4)`);
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(r.count(`tensor ${name} dim`));
    const type = r.u32();
    if (type !== GGML_TYPE_F32 && type !== GGML_TYPE_F16 && type !== GGML_TYPE_BF16) {
      throw new Error(
        `${path}: tensor ${name} is ${ggmlTypeName(type)} (ggml type ${type}), a quantized or non-float type; ` +
          `Arbor reads only F32, F16 and BF16 GGUF weights (use an unquantized GGUF of the model)`,
      );
    }
    infos.push({ name, dims, type, offset: r.count(`tensor ${name} offset`) });
  }
  const alignment = metadata.get("general.alignment") ?? ALIGNMENT;
  if (typeof alignment !== "number" || alignment <= 0) throw new Error(`${path}: bad general.alignment ${String(alignment)}`);
  const dataStart = alignUp(r.pos, alignment);
  const tensors = infos.map(({ name, dims, type, offset }) => {
    const shape = [...dims].reverse();
    const width = type === GGML_TYPE_F32 ? 4 : 2;
    const bytes = numel(shape) * width;
    const start = dataStart + offset;
    if (start + bytes > fileSize) {
      throw new Error(`${path}: truncated GGUF: tensor ${name} needs bytes ${start}..${start + bytes}, file has ${fileSize}`);
    }
    // A fresh buffer per tensor: aligned for the typed array and independent of the file.
    const raw = readAt(fd, start, bytes);
    if (type === GGML_TYPE_F32) return { name, shape, data: new Float32Array(raw) };
    const words = new Uint16Array(raw);
    return { name, shape, data: type === GGML_TYPE_F16 ? f16ToF32(words) : bf16ToF32(words) };
  });
  return { version, metadata, tensors };
}

/**
 * Recover the model config from a GGUF's llama metadata. `source` (the file) prefixes errors, e.g. for
 * a GGUF of another architecture, which Arbor's trainer cannot run.
 */
export function configFromGguf(metadata: Map<string, unknown>, source = "GGUF"): TinyLlamaConfig {
  const num = (key: string, fallback?: number): number => {
    const v = metadata.get(key) ?? fallback;
    if (typeof v !== "number") throw new Error(`${source}: GGUF metadata ${key}: missing or not a number`);
    return v;
  };
  const arch = metadata.get("general.architecture");
  if (arch !== "llama") {
    throw new Error(`${source}: GGUF architecture '${String(arch)}' is not supported here (Arbor's trainer and HF export run 'llama' only)`);
  }
  const tokens = metadata.get("tokenizer.ggml.tokens");
  const cfg: TinyLlamaConfig = {
    nVocab: num("llama.vocab_size", Array.isArray(tokens) ? tokens.length : undefined),
    nEmbd: num("llama.embedding_length"),
    nLayer: num("llama.block_count"),
    nHead: num("llama.attention.head_count"),
    nHeadKv: num("llama.attention.head_count_kv", num("llama.attention.head_count")),
    nFf: num("llama.feed_forward_length"),
    contextLength: num("llama.context_length"),
    rmsEps: num("llama.attention.layer_norm_rms_epsilon"),
    ropeFreqBase: num("llama.rope.freq_base", 10000),
  };
  const rot = metadata.get("llama.rope.dimension_count");
  if (rot !== undefined && rot !== cfg.nEmbd / cfg.nHead) {
    throw new Error(`${source}: GGUF llama.rope.dimension_count ${String(rot)} != head size ${cfg.nEmbd / cfg.nHead} (partial RoPE is not supported)`);
  }
  validateConfig(cfg);
  return cfg;
}

function extraMeta(key: string, value: string | number): MetaValue {
  if (RESERVED_PREFIXES.some((p) => key.startsWith(p))) {
    throw new RangeError(`metadata ${key}: reserved, it is derived from the config and vocabulary`);
  }
  if (key === "arbor.policy_version") {
    if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > 0xffffffff) {
      throw new RangeError(`metadata arbor.policy_version: must be an integer in 0..2^32-1 (got ${value})`);
    }
    return { type: "u32", value: value as number };
  }
  if (typeof value === "string") return { type: "string", value };
  if (typeof value !== "number" || !Number.isFinite(value)) throw new RangeError(`metadata ${key}: must be a string or a finite number`);
  if (Number.isInteger(value) && value >= 0 && value <= 0xffffffff) return { type: "u32", value };
  if (Number.isInteger(value) && value >= -0x80000000 && value < 0) return { type: "i32", value };
  return { type: "f64", value };
}

function writeMetaValue(w: ByteWriter, v: MetaValue): void {
  if (v.type === "array") {
    w.u32(GgufType.array);
    w.u32(GgufType[v.elem]);
    w.u64(v.value.length);
    if (v.elem === "string") for (const s of v.value) w.str(s);
    else if (v.elem === "f32") for (const x of v.value) w.f32(x);
    else if (v.elem === "u32") for (const x of v.value) w.u32(x);
    else for (const x of v.value) w.i32(x);
    return;
  }
  w.u32(GgufType[v.type]);
  switch (v.type) {
    case "u32":
      return w.u32(v.value);
    case "i32":
      return w.i32(v.value);
    case "f32":
      return w.f32(v.value);
    case "f64":
      return w.f64(v.value);
    case "bool":
      return w.u8(v.value ? 1 : 0);
    case "string":
      return w.str(v.value);
  }
}

function readMetaValue(r: ByteReader, type: number, key: string): unknown {
  switch (type) {
    case GgufType.u8:
      return r.take(1).readUInt8(0);
    case GgufType.i8:
      return r.take(1).readInt8(0);
    case GgufType.u16:
      return r.take(2).readUInt16LE(0);
    case GgufType.i16:
      return r.take(2).readInt16LE(0);
    case GgufType.u32:
      return r.u32();
    case GgufType.i32:
      return r.take(4).readInt32LE(0);
    case GgufType.f32:
      return r.take(4).readFloatLE(0);
    case GgufType.bool:
      return r.take(1).readUInt8(0) !== 0;
    case GgufType.string:
      return r.str();
    case GgufType.u64:
      return toNumberIfSafe(r.take(8).readBigUInt64LE(0));
    case GgufType.i64:
      return toNumberIfSafe(r.take(8).readBigInt64LE(0));
    case GgufType.f64:
      return r.take(8).readDoubleLE(0);
    case GgufType.array: {
      const elemType = r.u32();
      if (elemType === GgufType.array) throw new Error(`${r.path}: metadata ${key}: nested arrays are not supported`);
      const n = r.count(`metadata ${key} length`);
      if (n > r.remaining()) throw new Error(`${r.path}: truncated GGUF: metadata ${key} claims ${n} elements`);
      const out: unknown[] = new Array(n);
      for (let i = 0; i < n; i++) out[i] = readMetaValue(r, elemType, key);
      return out;
    }
    default:
      throw new Error(`${r.path}: metadata ${key} has unknown value type ${type}`);
  }
}

function toNumberIfSafe(v: bigint): number | bigint {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v;
}

function alignUp(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

function assertLittleEndian(): void {
  if (endianness() !== "LE") throw new Error("GGUF/safetensors I/O needs a little-endian machine");
}

/** Append-only little-endian byte builder. */
class ByteWriter {
  private chunks: Buffer[] = [];

  u8(v: number): void {
    const b = Buffer.alloc(1);
    b.writeUInt8(v);
    this.chunks.push(b);
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.chunks.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.chunks.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.chunks.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.chunks.push(b);
  }
  f64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeDoubleLE(v);
    this.chunks.push(b);
  }
  str(s: string): void {
    const bytes = Buffer.from(s, "utf8");
    this.u64(bytes.byteLength);
    this.chunks.push(bytes);
  }
  finish(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** Bounds-checked little-endian reader with errors that name the file and offset. */
class ByteReader {
  pos = 0;
  /** `buf` is the file's first bytes; `fileSize` its whole length (reading past `buf` asks for more). */
  constructor(
    private readonly buf: Buffer,
    readonly path: string,
    private readonly fileSize: number = buf.byteLength,
  ) {}

  take(n: number): Buffer {
    if (this.pos + n > this.buf.byteLength) {
      if (this.pos + n <= this.fileSize) throw new NeedMoreHeader();
      throw new Error(`${this.path}: truncated GGUF: need ${n} bytes at offset ${this.pos}, file has ${this.fileSize}`);
    }
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  remaining(): number {
    return this.fileSize - this.pos;
  }
  u32(): number {
    return this.take(4).readUInt32LE(0);
  }
  /** A u64 that must fit a JS number (counts, lengths, dims, offsets). */
  count(what: string): number {
    const v = this.take(8).readBigUInt64LE(0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${this.path}: ${what} ${v} is too large`);
    return Number(v);
  }
  str(): string {
    const n = this.count("string length");
    return this.take(n).toString("utf8");
  }
}
