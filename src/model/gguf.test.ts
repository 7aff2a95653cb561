import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "./config.js";
import { configFromGguf, readGguf, readGgufMetadata, vocabTokenizerSpec, writeGguf, writeGgufRaw } from "./gguf.js";
import { tokenizerSpecFromGguf } from "./gguf-tokenizer.js";
import { Vocab } from "./vocab.js";
import { initWeights } from "./weights.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-gguf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const vocab = new Vocab();
const config = tinyConfig({ nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 1, nFf: 24, contextLength: 1024 });

function write(name: string, seed: number, metadata?: Record<string, string | number>): string {
  const path = join(dir, name);
  writeGguf(path, { config, vocab, tensors: initWeights(config, new Rng(seed)), metadata });
  return path;
}

describe("GGUF", () => {
  it("round-trips metadata and tensors bit-exactly", () => {
    const tensors = initWeights(config, new Rng(3));
    const path = join(dir, "rt.gguf");
    writeGguf(path, { config, vocab, tensors, metadata: { "general.name": "t", "arbor.policy_version": 7, "arbor.note": "x", "arbor.lr": 0.5, "arbor.delta": -3 } });
    expect(readdirSync(dir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
    const g = readGguf(path);
    expect(g.version).toBe(3);
    expect(g.metadata.get("general.architecture")).toBe("llama");
    expect(g.metadata.get("general.name")).toBe("t");
    expect(g.metadata.get("arbor.policy_version")).toBe(7);
    expect(g.metadata.get("arbor.note")).toBe("x");
    expect(g.metadata.get("arbor.lr")).toBe(0.5);
    expect(g.metadata.get("arbor.delta")).toBe(-3);
    expect(g.metadata.get("llama.rope.dimension_count")).toBe(8);
    expect(g.metadata.get("llama.attention.layer_norm_rms_epsilon")).toBeCloseTo(1e-5, 10);
    expect(g.metadata.get("tokenizer.ggml.tokens")).toEqual(vocab.pieces);
    expect(g.metadata.get("tokenizer.ggml.token_type")).toEqual(vocab.types);
    expect(g.metadata.get("tokenizer.ggml.add_space_prefix")).toBe(false);
    expect(configFromGguf(g.metadata)).toEqual({ ...config, rmsEps: Math.fround(1e-5) });
    expect(g.tensors.map((t) => [t.name, t.shape])).toEqual(tensors.map((t) => [t.name, t.shape]));
    g.tensors.forEach((t, i) => {
      const want = tensors[i]!.data;
      expect(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(Buffer.from(want.buffer, want.byteOffset, want.byteLength))).toBe(true);
    });
  });

  it("stores ggml dims reversed and aligns tensor data to 32 bytes", () => {
    const buf = readFileSync(write("dims.gguf", 1));
    const name = Buffer.from("blk.0.ffn_down.weight");
    const at = buf.indexOf(name);
    expect(buf.readBigUInt64LE(at - 8)).toBe(BigInt(name.length));
    const p = at + name.length;
    expect(buf.readUInt32LE(p)).toBe(2);
    expect([buf.readBigUInt64LE(p + 4), buf.readBigUInt64LE(p + 12)]).toEqual([24n, 16n]); // ggml [n_ff, n_embd]
    expect(buf.readUInt32LE(p + 20)).toBe(0); // F32
    expect(Number(buf.readBigUInt64LE(p + 24)) % 32).toBe(0);
  });

  it("is byte-identical for the same seed and differs for another seed", () => {
    const a = readFileSync(write("a.gguf", 11));
    const b = readFileSync(write("b.gguf", 11));
    const c = readFileSync(write("c.gguf", 12));
    expect(a.equals(b)).toBe(true);
    expect(a.length).toBe(c.length);
    expect(a.equals(c)).toBe(false);
  });

  it("rejects reserved or invalid metadata and mismatched inputs", () => {
    expect(() => write("r.gguf", 1, { "llama.block_count": 3 })).toThrow(/llama.block_count: reserved/);
    expect(() => write("r.gguf", 1, { "arbor.policy_version": -1 })).toThrow(/arbor.policy_version/);
    const tensors = initWeights(config, new Rng(1));
    expect(() => writeGguf(join(dir, "r.gguf"), { config: { ...config, nVocab: 10 }, vocab, tensors })).toThrow(/nVocab \(10\)/);
  });

  it("writes any tokenizer spec and a chat template, and needs exactly one of vocab and tokenizer", () => {
    const tensors = initWeights(config, new Rng(2));
    const spec = { ...vocabTokenizerSpec(vocab), addSpacePrefix: true };
    const path = join(dir, "tok.gguf");
    writeGguf(path, { config, tokenizer: spec, chatTemplate: "{{ messages }}", tensors });
    expect(tokenizerSpecFromGguf(readGguf(path).metadata)).toEqual({ ...spec, chatTemplate: "{{ messages }}" });
    // The default is Arbor's vocabulary, with the same keys as an explicit spec of it.
    writeGguf(path, { config, vocab, tensors });
    const viaVocab = readFileSync(path);
    writeGguf(path, { config, tokenizer: vocabTokenizerSpec(vocab), tensors });
    expect(readFileSync(path).equals(viaVocab)).toBe(true);
    expect(() => writeGguf(path, { config, tensors })).toThrow(/exactly one of vocab and tokenizer/);
    expect(() => writeGguf(path, { config, vocab, tokenizer: spec, tensors })).toThrow(/exactly one of vocab and tokenizer/);
    expect(() => writeGguf(path, { config, tokenizer: { ...spec, tokens: spec.tokens.slice(1), types: spec.types.slice(1), scores: spec.scores?.slice(1) }, tensors })).toThrow(
      /config.nVocab \(\d+\) != vocabulary size/,
    );
  });

  it("reads metadata alone, of any size and whatever the tensor types", () => {
    const path = write("meta.gguf", 3, { "general.name": "m" });
    expect(readGgufMetadata(path)).toEqual({ version: 3, metadata: readGguf(path).metadata });
    // More metadata than the first read window (4 MiB): the window grows.
    const big = join(dir, "big.gguf");
    const long = "x".repeat(5 << 20);
    writeGgufRaw(big, [["general.alignment", { type: "u32", value: 32 }], ["a.long", { type: "string", value: long }], ["a.after", { type: "u32", value: 7 }]], []);
    const m = readGgufMetadata(big).metadata;
    expect((m.get("a.long") as string).length).toBe(long.length);
    expect(m.get("a.after")).toBe(7);
    writeFileSync(big, readFileSync(big).subarray(0, 3 << 20));
    expect(() => readGgufMetadata(big)).toThrow(/truncated GGUF/);
  });

  it("gives clear errors for bad magic, truncation and quantized tensors", () => {
    const bad = join(dir, "bad.gguf");
    writeFileSync(bad, Buffer.from("GGMLxxxxxxxxxxxxxxxxxxxxxxxx"));
    expect(() => readGguf(bad)).toThrow(/not a GGUF file/);

    const full = readFileSync(write("full.gguf", 1));
    writeFileSync(bad, full.subarray(0, 2000));
    expect(() => readGguf(bad)).toThrow(/truncated GGUF/);
    writeFileSync(bad, full.subarray(0, full.length - 4));
    expect(() => readGguf(bad)).toThrow(/truncated GGUF: tensor output.weight/);

    // A quantized tensor: the error names the file, the tensor and the ggml type.
    writeFileSync(bad, oneTensorGguf(12, Buffer.alloc(144)));
    expect(() => readGguf(bad)).toThrow(`${bad}: tensor w is Q4_K (ggml type 12), a quantized or non-float type; Arbor reads only F32, F16 and BF16 GGUF weights`);
    writeFileSync(bad, oneTensorGguf(8, Buffer.alloc(34)));
    expect(() => readGguf(bad)).toThrow(/tensor w is Q8_0 \(ggml type 8\)/);
    // Its metadata still reads (a quantized model's tokenizer and template).
    expect(readGgufMetadata(bad)).toEqual({ version: 3, metadata: new Map() });
    writeFileSync(bad, oneTensorGguf(99, Buffer.alloc(8)));
    expect(() => readGguf(bad)).toThrow(/tensor w is type 99 \(ggml type 99\)/);
  });

  it("reads F16 and BF16 tensors as float32, exactly", () => {
    const path = join(dir, "half.gguf");
    // F16: 1, -2, 0.5, 65504 (max), 2^-24 (smallest subnormal), -0, inf, 3.140625
    const f16 = Uint16Array.from([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x4248]);
    writeFileSync(path, oneTensorGguf(1, Buffer.from(f16.buffer), 8));
    expect(Array.from(readGguf(path).tensors[0]!.data)).toEqual([1, -2, 0.5, 65504, 2 ** -24, -0, Infinity, 3.140625]);
    // BF16: the top 16 bits of the float32.
    const want = Float32Array.from([1, -2.5, 3.0e38, 1.1754943508222875e-38, -0.0078125, 0, 7, -1e-5]);
    const bf16 = Uint16Array.from(new Uint32Array(want.buffer), (b) => b >>> 16);
    writeFileSync(path, oneTensorGguf(30, Buffer.from(bf16.buffer), 8));
    expect(Array.from(readGguf(path).tensors[0]!.data)).toEqual(Array.from(new Float32Array(Uint32Array.from(bf16, (w) => w << 16).buffer)));
  });

  it("reads a header longer than the first prefix it reads (big vocabularies) and tensors after it", () => {
    const path = join(dir, "long-header.gguf");
    const tensors = initWeights(config, new Rng(5));
    writeGguf(path, { config, vocab, tensors, metadata: { "arbor.note": "x".repeat(9 << 20) } });
    const g = readGguf(path);
    expect((g.metadata.get("arbor.note") as string).length).toBe(9 << 20);
    g.tensors.forEach((t, i) => expect(t.data).toEqual(tensors[i]!.data));
  });

  it("names the file and the architecture when the GGUF is not a llama model", () => {
    const meta = new Map<string, unknown>([["general.architecture", "qwen2"]]);
    expect(() => configFromGguf(meta, "/m/q.gguf")).toThrow("/m/q.gguf: GGUF architecture 'qwen2' is not supported here (Arbor's trainer and HF export run 'llama' only)");
  });
});

/** A GGUF with no metadata and one 1-D tensor `w` of `n` elements of ggml `type`. */
function oneTensorGguf(type: number, data: Buffer, n = 32): Buffer {
  const name = Buffer.from("w");
  const head = Buffer.concat([Buffer.from("GGUF"), u32(3), u64(1), u64(0), u64(name.length), name, u32(1), u64(n), u32(type), u64(0)]);
  return Buffer.concat([head, Buffer.alloc(64 - head.length), data]);
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
}
function u64(v: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
}
