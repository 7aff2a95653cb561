import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "./config.js";
import { readSafetensors, writeSafetensors } from "./safetensors.js";
import { initWeights } from "./weights.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-st-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tensors = initWeights(tinyConfig({ nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 24 }), new Rng(9));

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

    const header = Buffer.from(JSON.stringify({ w: { dtype: "F16", shape: [2], data_offsets: [0, 4] } }));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(bad, Buffer.concat([len, header, Buffer.alloc(4)]));
    expect(() => readSafetensors(bad)).toThrow(/tensor w has dtype F16; only F32/);
  });

  it("rejects mismatched data and duplicate names on write", () => {
    const p = join(dir, "c.safetensors");
    expect(() => writeSafetensors(p, [{ name: "w", shape: [3], data: new Float32Array(2) }])).toThrow(/tensor w: data has 2 values/);
    const t = { name: "constructor", shape: [1], data: new Float32Array(1) };
    expect(() => writeSafetensors(p, [t])).not.toThrow();
    expect(() => writeSafetensors(p, [t, t])).toThrow(/duplicate/);
  });
});
