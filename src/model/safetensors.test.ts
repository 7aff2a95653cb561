import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { f32ToBf16, f32ToF16 } from "../testing/half-floats.js";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "./config.js";
import { isIntTensor, readSafetensors, writeSafetensors, type IntTensor } from "./safetensors.js";
import { initWeights, type Tensor } from "./weights.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-st-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tensors = initWeights(tinyConfig({ nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 24 }), new Rng(9));

/** A safetensors file built by hand from a header object and raw data bytes (an independent writer). */
function handMade(path: string, header: object, data: Uint8Array, pad = 0): void {
  const json = Buffer.from(JSON.stringify(header) + " ".repeat(pad));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(path, Buffer.concat([len, json, data]));
}

describe("safetensors", () => {
  it("round-trips tensors and metadata bit-exactly in the standard layout", () => {
    const path = join(dir, "a.safetensors");
    writeSafetensors(path, tensors, { format: "pt", step: "3" });
    const buf = readFileSync(path);
    const headerLen = Number(buf.readBigUInt64LE(0));
    expect((8 + headerLen) % 8).toBe(0);
    const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString("utf8"));
    expect(header.__metadata__).toEqual({ format: "pt", step: "3" });
    expect(header["token_embd.weight"]).toEqual({ dtype: "F32", shape: tensors[0]!.shape, data_offsets: [0, tensors[0]!.data.byteLength] });
    expect(buf.length).toBe(8 + headerLen + tensors.reduce((s, t) => s + t.data.byteLength, 0));

    const back = readSafetensors(path);
    expect(back.metadata).toEqual({ format: "pt", step: "3" });
    expect(back.tensors.map((t) => [t.name, t.shape])).toEqual(tensors.map((t) => [t.name, t.shape]));
    back.tensors.forEach((t, i) => expect(Buffer.from(t.data.buffer).equals(Buffer.from(tensors[i]!.data.buffer))).toBe(true));
  });

  it("gives clear errors for truncated and malformed files", () => {
    const path = join(dir, "b.safetensors");
    writeSafetensors(path, tensors);
    const full = readFileSync(path);
    const bad = join(dir, "bad.safetensors");
    writeFileSync(bad, full.subarray(0, 5));
    expect(() => readSafetensors(bad)).toThrow(/truncated safetensors file \(5 bytes/);
    writeFileSync(bad, full.subarray(0, 40));
    expect(() => readSafetensors(bad)).toThrow(/truncated safetensors file: header needs/);
    writeFileSync(bad, full.subarray(0, full.length - 1));
    expect(() => readSafetensors(bad)).toThrow(/truncated safetensors file: tensor output.weight ends at/);

    const header = Buffer.from(JSON.stringify({ w: { dtype: "F8_E4M3", shape: [2], data_offsets: [0, 2] } }));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(bad, Buffer.concat([len, header, Buffer.alloc(2)]));
    expect(() => readSafetensors(bad)).toThrow(/tensor w has dtype F8_E4M3; only F32, F16, BF16, I32 and I64 are supported/);

    // The byte buffer must be entirely indexed (spec: no holes), and a span must fit dtype and shape.
    handMade(bad, { a: { dtype: "I32", shape: [1], data_offsets: [4, 8] } }, new Uint8Array(8));
    expect(() => readSafetensors(bad)).toThrow(/tensor a starts at data byte 4, expected 0/);
    handMade(bad, { a: { dtype: "I32", shape: [1], data_offsets: [0, 4] } }, new Uint8Array(8));
    expect(() => readSafetensors(bad)).toThrow(/tensors cover 4 data bytes, file has 8/);
    handMade(bad, { a: { dtype: "I64", shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4));
    expect(() => readSafetensors(bad)).toThrow(/tensor a: data_offsets span 4 bytes, I64 shape \[1\] needs 8/);
  });

  it("rejects mismatched data and duplicate names on write", () => {
    const p = join(dir, "c.safetensors");
    expect(() => writeSafetensors(p, [{ name: "w", shape: [3], data: new Float32Array(2) }])).toThrow(/tensor w: data has 2 values/);
    const t = { name: "constructor", shape: [1], data: new Float32Array(1) };
    expect(() => writeSafetensors(p, [t])).not.toThrow();
    expect(() => writeSafetensors(p, [t, t])).toThrow(/duplicate/);
    const wrong = { name: "u", shape: [1], data: new Uint32Array(1) } as unknown as IntTensor;
    expect(() => writeSafetensors(p, [wrong])).toThrow(/tensor u: data must be a Float32Array \(F32\) or an Int32Array \(I32\)/);
  });

  it("writes I32 beside F32 in the spec layout an independent reader understands", () => {
    const path = join(dir, "i32.safetensors");
    // A view into a larger buffer (non-zero byteOffset): only the viewed values may be written.
    const backing = new Int32Array([99, -1, 0, 7, 2 ** 31 - 1, -(2 ** 31), 5, 99]);
    const ids: IntTensor = { name: "ids", shape: [2, 3], data: backing.subarray(1, 7) };
    const f: Tensor = { name: "f", shape: [3], data: new Float32Array([0.5, -2, 1e-7]) };
    const empty: IntTensor = { name: "empty", shape: [0], data: new Int32Array(0) };
    const scalar: IntTensor = { name: "scalar", shape: [], data: new Int32Array([42]) };
    writeSafetensors(path, [f, ids, empty, scalar], { k: "v" });

    // Independent reader: parse the header by hand and view the bytes directly.
    const buf = readFileSync(path);
    const n = Number(buf.readBigUInt64LE(0));
    expect(n % 8).toBe(0);
    const text = buf.subarray(8, 8 + n).toString("utf8");
    expect(text[0]).toBe("{");
    expect(text.trimEnd().length).toBeGreaterThan(n - 8); // only trailing spaces, fewer than 8
    const header = JSON.parse(text);
    expect(header).toEqual({
      __metadata__: { k: "v" },
      f: { dtype: "F32", shape: [3], data_offsets: [0, 12] },
      ids: { dtype: "I32", shape: [2, 3], data_offsets: [12, 36] },
      empty: { dtype: "I32", shape: [0], data_offsets: [36, 36] },
      scalar: { dtype: "I32", shape: [], data_offsets: [36, 40] },
    });
    expect(buf.length).toBe(8 + n + 40);
    const data = buf.buffer.slice(buf.byteOffset + 8 + n, buf.byteOffset + buf.length);
    expect(Array.from(new Int32Array(data, 12, 6))).toEqual([-1, 0, 7, 2 ** 31 - 1, -(2 ** 31), 5]);
    expect(new DataView(data).getInt32(12 + 4, true)).toBe(0); // little-endian on disk
    expect(Array.from(new Float32Array(data, 0, 3))).toEqual(Array.from(f.data));
    expect(new Int32Array(data, 36, 1)[0]).toBe(42);

    const back = readSafetensors(path);
    expect(back.tensors.map((t) => [t.name, t.shape, isIntTensor(t)])).toEqual([
      ["f", [3], false],
      ["ids", [2, 3], true],
      ["empty", [0], true],
      ["scalar", [], true],
    ]);
    expect(back.tensors[0]!.data).toEqual(f.data);
    expect(back.tensors[1]!.data).toEqual(new Int32Array([-1, 0, 7, 2 ** 31 - 1, -(2 ** 31), 5]));
  });

  it("reads F16 and BF16 tensors (Hugging Face checkpoints) as float32, exactly, and reports each dtype", () => {
    const path = join(dir, "half.safetensors");
    const want = Float32Array.from([1, -2.5, 0.099609375, 3.0e38, -1e-5, 0, 1.1754943508222875e-38, 7]);
    const bf16 = f32ToBf16(want);
    const f16 = f32ToF16(Float32Array.from([1, -2, 0.5, 65504, 2 ** -24, -0, 3.140625, 1e-3]));
    const data = new Uint8Array(32);
    data.set(new Uint8Array(bf16.buffer), 0);
    data.set(new Uint8Array(f16.buffer), 16);
    const header = { b: { dtype: "BF16", shape: [2, 4], data_offsets: [0, 16] }, h: { dtype: "F16", shape: [8], data_offsets: [16, 32] } };
    handMade(path, header, data, (8 - (JSON.stringify(header).length % 8)) % 8);
    const { tensors: got, dtypes } = readSafetensors(path);
    expect(Object.fromEntries(dtypes)).toEqual({ b: "BF16", h: "F16" });
    expect(got[0]).toMatchObject({ name: "b", shape: [2, 4] });
    expect(got[0]!.data).toBeInstanceOf(Float32Array);
    // BF16 keeps the float32's top half; rounding to nearest even is what the writer did.
    expect(Array.from(got[0]!.data)).toEqual(Array.from(new Float32Array(Uint32Array.from(bf16, (w) => w << 16).buffer)));
    expect(Math.abs((got[0]!.data[2] as number) - 0.099609375)).toBe(0);
    const h = Array.from(got[1]!.data);
    expect(h.slice(0, 7)).toEqual([1, -2, 0.5, 65504, 2 ** -24, -0, 3.140625]);
    expect(Math.abs((h[7] as number) - 1e-3)).toBeLessThan(1e-6);
  });

  it("reads hand-written I64 tensors into int32 when every value fits, else fails clearly", () => {
    const path = join(dir, "i64.safetensors");
    const wide = new BigInt64Array([0n, -5n, 2147483647n, -2147483648n]);
    const f = new Float32Array([1.5]);
    // I64 first (as the reference writer orders by alignment), a header padded to 8 bytes.
    const header = { b: { dtype: "I64", shape: [2, 2], data_offsets: [0, 32] }, a: { dtype: "F32", shape: [1], data_offsets: [32, 36] } };
    const data = Buffer.concat([Buffer.from(wide.buffer), Buffer.from(f.buffer)]);
    handMade(path, header, data, (8 - (JSON.stringify(header).length % 8)) % 8);
    const back = readSafetensors(path);
    expect(back.metadata).toEqual({});
    expect(back.tensors.map((t) => t.name)).toEqual(["b", "a"]);
    expect(back.tensors[0]).toEqual({ name: "b", shape: [2, 2], data: new Int32Array([0, -5, 2147483647, -2147483648]) });
    expect(back.tensors[1]!.data).toEqual(f);

    wide[1] = 2147483648n;
    handMade(path, header, Buffer.concat([Buffer.from(wide.buffer), Buffer.from(f.buffer)]));
    expect(() => readSafetensors(path)).toThrow(/tensor b \(I64\) has b\[1\] = 2147483648, outside the int32 range/);
  });
});
