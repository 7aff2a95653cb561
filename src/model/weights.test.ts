import { describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { tinyConfig } from "./config.js";
import { checkTensors, expectedShapes, initWeights, INIT_STD } from "./weights.js";

const cfg = tinyConfig({ nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 48 });

describe("initWeights", () => {
  it("creates every GGUF tensor with its row-major shape", () => {
    const ws = initWeights(cfg, new Rng(1));
    expect(ws.map((w) => w.name)).toEqual(expectedShapes(cfg).map((e) => e.name));
    const shape = (n: string): number[] | undefined => ws.find((w) => w.name === n)?.shape;
    expect(shape("token_embd.weight")).toEqual([cfg.nVocab, 32]);
    expect(shape("blk.1.attn_q.weight")).toEqual([32, 32]);
    expect(shape("blk.1.attn_k.weight")).toEqual([16, 32]);
    expect(shape("blk.0.ffn_down.weight")).toEqual([32, 48]);
    expect(shape("blk.0.ffn_up.weight")).toEqual([48, 32]);
    expect(shape("output.weight")).toEqual([cfg.nVocab, 32]);
    expect(() => checkTensors(cfg, ws)).not.toThrow();
  });

  it("sets norms to one and matrices to the documented std", () => {
    const ws = initWeights(cfg, new Rng(1));
    for (const w of ws.filter((t) => t.name.endsWith("norm.weight"))) expect([...w.data].every((x) => x === 1)).toBe(true);
    const std = (name: string): number => {
      const d = ws.find((w) => w.name === name)!.data;
      let s = 0;
      for (const x of d) s += x * x;
      return Math.sqrt(s / d.length);
    };
    expect(std("token_embd.weight")).toBeCloseTo(INIT_STD, 3);
    expect(std("blk.0.ffn_down.weight")).toBeCloseTo(INIT_STD / 2, 3);
  });

  it("is deterministic per seed and differs across seeds", () => {
    const a = initWeights(cfg, new Rng(5));
    const b = initWeights(cfg, new Rng(5));
    const c = initWeights(cfg, new Rng(6));
    const bytes = (ts: typeof a): Buffer => Buffer.concat(ts.map((t) => Buffer.from(t.data.buffer)));
    expect(a.map((t) => [t.name, t.shape])).toEqual(b.map((t) => [t.name, t.shape]));
    expect(bytes(a).equals(bytes(b))).toBe(true);
    for (const name of ["token_embd.weight", "blk.1.attn_q.weight", "output.weight"]) {
      const x = Buffer.from(a.find((t) => t.name === name)!.data.buffer);
      expect(x.equals(Buffer.from(c.find((t) => t.name === name)!.data.buffer))).toBe(false);
    }
  });

  it("checkTensors names the problem", () => {
    const ws = initWeights(cfg, new Rng(1));
    expect(() => checkTensors(cfg, ws.slice(1))).toThrow(/token_embd.weight: missing/);
    const bad = ws.map((t) => (t.name === "blk.0.attn_v.weight" ? { ...t, shape: [32, 16] } : t));
    expect(() => checkTensors(cfg, bad)).toThrow(/blk.0.attn_v.weight: shape \[32,16\] but the config needs \[16,32\]/);
    expect(() => checkTensors(cfg, [...ws, { name: "x", shape: [1], data: new Float32Array(1) }])).toThrow(/tensor x: not part/);
  });
});
