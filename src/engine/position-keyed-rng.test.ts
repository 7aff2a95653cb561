import { describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { PositionKeyedRng } from "./position-keyed-rng.js";

describe("PositionKeyedRng", () => {
  it("gives the same draw for the same (seed, position), whatever was drawn before", () => {
    const a = PositionKeyedRng.fromSeed(42);
    const b = PositionKeyedRng.fromSeed(42);
    for (let i = 0; i < 5; i++) b.float();
    b.drawAt(999);
    for (const p of [0, 1, 17, 1023, 2 ** 31 - 1]) expect(a.drawAt(p)).toBe(b.drawAt(p));
    expect(a.drawAt(3)).toBe(a.drawAt(3));
  });

  it("differs across positions and across seeds", () => {
    const a = PositionKeyedRng.fromSeed(42);
    const b = PositionKeyedRng.fromSeed(43);
    const pa = Array.from({ length: 1000 }, (_, p) => a.drawAt(p));
    const pb = Array.from({ length: 1000 }, (_, p) => b.drawAt(p));
    expect(new Set(pa).size).toBe(1000);
    expect(pa.filter((x, i) => x === pb[i])).toHaveLength(0);
  });

  it("draws uniformly in [0, 1) along positions (chi-square over 20 bins) and is uncorrelated with the next position", () => {
    const rng = PositionKeyedRng.fromSeed(7);
    const n = 20_000;
    const bins = new Array<number>(20).fill(0);
    const xs: number[] = [];
    for (let p = 0; p < n; p++) {
      const x = rng.drawAt(p);
      xs.push(x);
      bins[Math.floor(x * 20)]! += 1;
    }
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    const expected = n / 20;
    const chi2 = bins.reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    // 19 degrees of freedom: the 99.9% quantile is 43.8.
    expect(chi2).toBeLessThan(43.8);
    const mean = xs.reduce((s, x) => s + x, 0) / n;
    let cov = 0;
    for (let p = 0; p + 1 < n; p++) cov += ((xs[p] as number) - mean) * ((xs[p + 1] as number) - mean);
    // Lag-1 correlation of independent uniforms: ~N(0, 1/n); 5 standard errors.
    expect(Math.abs(cov / (n - 1) / (1 / 12))).toBeLessThan(5 / Math.sqrt(n));
  });

  it("hashes seeds outside 32 bits instead of truncating them, and stays a plain stream for float()", () => {
    expect(PositionKeyedRng.fromSeed(2 ** 32).seed).not.toBe(0);
    expect(PositionKeyedRng.fromSeed(2 ** 32).drawAt(5)).not.toBe(PositionKeyedRng.fromSeed(0).drawAt(5));
    expect(PositionKeyedRng.fromSeed(-1).drawAt(5)).not.toBe(PositionKeyedRng.fromSeed(2 ** 32 - 1).drawAt(5));
    const s = PositionKeyedRng.fromSeed(9);
    const r = new Rng(9);
    expect([s.float(), s.float()]).toEqual([r.float(), r.float()]);
  });

  it("rejects bad seeds and positions", () => {
    expect(() => PositionKeyedRng.fromSeed(1.5)).toThrow(/seed must be an integer/);
    const rng = PositionKeyedRng.fromSeed(1);
    expect(() => rng.drawAt(-1)).toThrow(/position/);
    expect(() => rng.drawAt(0.5)).toThrow(/position/);
  });
});
