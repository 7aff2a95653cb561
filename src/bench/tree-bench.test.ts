import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { syntheticSweBatch } from "../batch/tree/synthetic.js";
import { Vocab } from "../model/vocab.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { readRunBatch, runTreeBench, treeBenchConfig, treeTable } from "./tree-bench.js";
import { writeRunToStore } from "../testing/tree-bench-store.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-tree-bench-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("arbor bench tree (quick)", () => {
  it("prints flat and tree rows for the synthetic batch and a run read from SQLite, with equal losses and ratios", async () => {
    // A finished run in a real SQLite store stands in for .arbor/runs/… (the CLI runs the quickstart when none exists).
    const storePath = join(dir, "run", "store.sqlite");
    const store = new SqliteTrajectoryStore(storePath);
    const run = syntheticSweBatch({ seed: 9, tasks: 2, groupSize: 4, turns: [2, 3], systemTokens: 20, taskTokens: [5, 10], outputTokens: [3, 8], toolTokens: [4, 10], vocab: new Vocab().size });
    await writeRunToStore(store, "fixture-run", run.groups, run.trajectories);
    await store.close();

    const lines: string[] = [];
    const tables = await runTreeBench({ ...treeBenchConfig(true), storePath }, (l) => lines.push(l));
    expect(tables).toHaveLength(1);
    const t = tables[0]!;
    expect(t.columns).toEqual(["source", "samples", "layout", "tokens", "step (ms)", "cpu (ms)", "loss", "tokens ×", "target tokens ×", "time ×", "target time ×", "time ÷ tokens"]);
    const col = (name: string) => t.columns.indexOf(name);
    expect(t.rows.map((r) => [r[col("source")], r[col("layout")]])).toEqual([
      ["SWE-agent G=4 3-4 calls (per-call)", "flat"],
      ["SWE-agent G=4 3-4 calls (per-call)", "tree"],
      ["SWE-agent G=4 3-4 calls (merged)", "flat"],
      ["SWE-agent G=4 3-4 calls (merged)", "tree"],
      ["run fixture-run (per-call)", "flat"],
      ["run fixture-run (per-call)", "tree"],
      ["run fixture-run (merged)", "flat"],
      ["run fixture-run (merged)", "tree"],
    ]);
    for (let i = 0; i < t.rows.length; i += 2) {
      const flat = t.rows[i]!;
      const tree = t.rows[i + 1]!;
      expect(flat[col("tokens ×")]).toBe(1);
      // Shared prompts and growing contexts: the tree runs strictly fewer tokens than flat packing.
      expect(tree[col("tokens ×")]).toBeGreaterThan(1);
      expect(tree[col("tokens ×")]).toBe((flat[col("tokens")] as number) / (tree[col("tokens")] as number));
      expect(tree[col("step (ms)")]).toBeGreaterThan(0);
      expect(tree[col("cpu (ms)")]).toBeGreaterThan(0);
      expect(tree[col("target time ×")]).toMatch(/^≥ \d+\.\d\d (met|MISSED)$/);
      expect(tree[col("time ÷ tokens")]).toBe(`${((tree[col("time ×")] as number) / (tree[col("tokens ×")] as number)).toFixed(2)} (≥ 0.8)`);
      // The token target is printed for the SWE-agent per-call batch only.
      expect(tree[col("target tokens ×")] !== "").toBe(i === 0);
      // Exactness shows in the bench too: both layouts compute the same loss.
      expect(Math.abs((tree[col("loss")] as number) - (flat[col("loss")] as number))).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(flat[col("loss")] as number)));
    }
    expect(lines).toHaveLength(8);
  }, 60_000);

  it("reads a run's training groups only: held-out evaluation groups are never a training batch", async () => {
    const storePath = join(dir, "held-out", "store.sqlite");
    const store = new SqliteTrajectoryStore(storePath);
    const run = syntheticSweBatch({ seed: 3, tasks: 3, groupSize: 2, turns: [1, 2], systemTokens: 10, taskTokens: [5, 8], outputTokens: [3, 5], toolTokens: [4, 6], vocab: new Vocab().size });
    // The held-out evaluation of v0 runs before the first iteration: its group comes first in the store.
    const [evalGroup, ...training] = run.groups;
    await writeRunToStore(store, "r", [{ ...evalGroup!, heldOutVersion: 0 }, ...training], run.trajectories);
    await store.close();
    const read = await readRunBatch(storePath, 100);
    expect(read.groups.map((g) => g.id)).toEqual(training.map((g) => g.id));
    expect(read.trajectories.map((t) => t.program.groupId).sort()).toEqual(training.flatMap((g) => g.programIds.map(() => g.id)).sort());
  });

  it("computes ratios as flat / row (time from CPU time) and prints each beside its target", () => {
    const t = treeTable([
      { source: "s", samples: 2, layout: "flat", tokens: 1000, stepMs: 900, cpuMs: 500, loss: 1, tokenTarget: true },
      { source: "s", samples: 2, layout: "tree", tokens: 100, stepMs: 10, cpuMs: 62.5, loss: 1, tokenTarget: true },
      { source: "r", samples: 2, layout: "flat", tokens: 100, stepMs: 50, cpuMs: 50, loss: 1 },
      { source: "r", samples: 2, layout: "tree", tokens: 25, stepMs: 20, cpuMs: 20, loss: 1 },
    ]);
    // 10× tokens (target 8: met); 8× time, target 0.8 × 10 = 8: met.
    expect(t.rows[1]!.slice(-5)).toEqual([10, "≥ 8 met", 8, "≥ 8.00 met", "0.80 (≥ 0.8)"]);
    expect(t.rows[0]!.slice(-5)).toEqual([1, "", 1, "", ""]);
    // No token target on other sources; 2.5× time for 4× tokens misses 0.8 × 4 = 3.2.
    expect(t.rows[3]!.slice(-5)).toEqual([4, "", 2.5, "≥ 3.20 MISSED", "0.63 (≥ 0.8)"]);
  });
});
