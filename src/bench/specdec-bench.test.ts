// `arbor bench specdec --quick` on the shipped policy: every table's rows, the same tokens in every mode (the
// bench throws otherwise), drafts verified and accepted where speculation is on, and acceptance rising with
// finished siblings. Timings are printed, not asserted.
import { describe, expect, it } from "vitest";
import { specdecBench } from "./specdec-bench.js";

describe("arbor bench specdec (quick)", () => {
  it("compares no speculation, per-request, global and group-shared trees; acceptance grows with siblings", async () => {
    const lines: string[] = [];
    const [a, b, c, d] = await specdecBench.run({ quick: true, log: (l) => lines.push(l) });
    for (const t of [a!, b!]) {
      const col = (name: string) => t.columns.indexOf(name);
      expect(t.rows.map((r) => r[col("drafting")])).toEqual(["none", "per-request trees", "suffix (+ global tree)", "group-shared trees (Seer)", "group-shared, adaptive budget", "draft model (aligned)", "draft model (stale: untrained after v0)", "draft model (cut, undistilled: an engine's first draft)"]);
      // One workload: the same output tokens in every mode.
      expect(new Set(t.rows.map((r) => r[col("output tokens")])).size).toBe(1);
      expect(t.rows[0]![col("verification steps")]).toBe(0);
      for (const r of t.rows.slice(1, 4)) {
        expect(r[col("verification steps")]).toBeGreaterThan(0);
        expect(r[col("mean acceptance length")]).toBeGreaterThan(1);
      }
      for (const r of t.rows) expect(r[col("tok/s")]).toBeGreaterThan(0);
      // The draft models draft every step; whatever their acceptance, it is measured.
      for (const r of t.rows.slice(5)) {
        expect(r[col("verification steps")]).toBeGreaterThan(0);
        expect(r[col("mean acceptance length")]).toBeGreaterThanOrEqual(1);
      }
    }
    // Group-shared trees draft from the siblings' responses: at least as long accepted runs as per-request trees.
    const acc = (t: typeof a, name: string) => t!.rows.find((r) => r[0] === name)![t!.columns.indexOf("mean acceptance length")] as number;
    expect(acc(a, "group-shared trees (Seer)")).toBeGreaterThanOrEqual(acc(a, "per-request trees"));
    const sweep = c!.rows.map((r) => [r[0], r[3]] as [number, number]);
    expect(sweep.map(([s]) => s)).toEqual([0, 3]);
    expect(sweep[1]![1]).toBeGreaterThan(sweep[0]![1]);
    expect(lines.some((l) => l.includes("siblings 3"))).toBe(true);
    expect(a!.notes!.some((l) => /Stale: distilled on v0's rollouts only \(Top-K KL [\d.]+ → [\d.]+/.test(l))).toBe(true);
    // (d) on the cost model: a lone request gains from speculation, with or without the budget.
    const gpu = d!.rows.map((r) => Object.fromEntries(d!.columns.map((col, i) => [col, r[i]])));
    expect(gpu.map((r) => [r["mean acceptance length"], r.requests])).toEqual([
      [1.7, 1],
      [1.7, 64],
      [2.85, 1],
      [2.85, 64],
    ]);
    for (const r of gpu.filter((x) => x.requests === 1)) expect(r["× adaptive"]).toBeGreaterThan(1.4);
  }, 300_000);
});
