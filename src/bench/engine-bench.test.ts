import { describe, expect, it } from "vitest";
import { getBenchmark } from "./registry.js";

describe("arbor bench engine", () => {
  it("produces the llama.cpp throughput table with both sides measured", async () => {
    const lines: string[] = [];
    const tables = await getBenchmark("engine").run({ quick: true, log: (l) => lines.push(l) });
    const t = tables.find((x) => x.title.startsWith("(c)"))!;
    expect(t.rows.map((r) => r[0])).toEqual([1, 2]);
    expect(t.columns.slice(2, 7)).toEqual(["node-llama-cpp tok/s", "arbor tok/s", "ratio", "target", "meets"]);
    expect(t.columns.slice(12)).toEqual(["arbor, llama.cpp samples tok/s", "its ratio", "it meets"]);
    for (const r of t.rows) {
      const [rawTps, arborTps, ratio, target, meets, rawCpu, arborCpu, cpuRatio] = r.slice(2) as [number, number, number, number, string, number, number, number];
      expect(rawTps).toBeGreaterThan(0);
      expect(arborTps).toBeGreaterThan(0);
      expect(ratio).toBeCloseTo(arborTps / rawTps, 9);
      expect(target).toBe(0.9);
      expect(meets).toBe(ratio >= 0.9 ? "yes" : "no");
      expect(rawCpu).toBeGreaterThan(0);
      expect(arborCpu).toBeGreaterThan(0);
      expect(cpuRatio).toBeCloseTo(rawCpu / arborCpu, 9);
      const [nativeTps, nativeRatio, nativeMeets] = r.slice(12) as [number, number, string];
      expect(nativeTps).toBeGreaterThan(0);
      expect(nativeRatio).toBeCloseTo(nativeTps / rawTps, 9);
      expect(nativeMeets).toBe(nativeRatio >= 0.9 ? "yes" : "no");
    }
    expect(lines.filter((l) => l.startsWith("llamacpp")).length).toBe(2);
    // (a): every cited reference point is matched within 10%.
    const calibration = tables.filter((x) => x.title.startsWith("(a)"));
    expect(calibration.length).toBeGreaterThanOrEqual(2);
    const cited = calibration.flatMap((x) => x.rows).filter((r) => typeof r[2] === "number");
    expect(cited.length).toBeGreaterThan(5);
    for (const r of cited) expect(Math.abs(Number(r[4]))).toBeLessThanOrEqual(10);
    // (b): caching serves part of the prompts from cache and computes fewer prompt tokens.
    const b = tables.find((x) => x.title.startsWith("(b)"))!;
    const metric = (name: string) => b.rows.find((r) => r[0] === name)!;
    expect(metric("prefix-cache hit rate")[1]).toBe(0);
    expect(metric("prefix-cache hit rate")[2]).toBeGreaterThan(0.3);
    expect(metric("prompt tokens computed (incl. recompute)")[3]).toBeLessThan(1);
  });

  it("rejects an unknown benchmark naming the known ones", () => {
    expect(() => getBenchmark("nope")).toThrowError(/unknown benchmark 'nope' \(known: engine/);
  });
});
