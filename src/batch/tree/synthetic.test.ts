import { describe, expect, it } from "vitest";
import { createGrpo } from "../estimators/grpo.js";
import { buildSampleSet } from "../trajectory-samples.js";
import { syntheticSweBatch } from "./synthetic.js";
import { buildTreeBatch } from "./tree-batch.js";

describe("syntheticSweBatch", () => {
  it("is deterministic in its seed and makes groups of 8 with growing, extending contexts", () => {
    const a = syntheticSweBatch({ seed: 3 });
    expect(a).toEqual(syntheticSweBatch({ seed: 3 }));
    expect(a).not.toEqual(syntheticSweBatch({ seed: 4 }));
    expect(a.groups.map((g) => g.programIds.length)).toEqual([8, 8]);
    for (const t of a.trajectories) {
      for (let k = 1; k < t.calls.length; k++) {
        const prev = t.calls[k - 1]!;
        const cur = t.calls[k]!;
        expect(cur.promptTokenIds.slice(0, prev.promptTokenIds.length + prev.outputTokenIds.length)).toEqual(prev.promptTokenIds.concat(prev.outputTokenIds));
        expect(cur.promptTokenIds.length).toBeGreaterThan(prev.promptTokenIds.length + prev.outputTokenIds.length);
      }
    }
  });

  it("per-call samples collapse to exactly the unique tokens: system + tasks + each program's outputs and tools", () => {
    const b = syntheticSweBatch({ seed: 11, tasks: 3, systemTokens: 300 });
    const set = buildSampleSet(b.trajectories, b.groups, "per-call");
    const { samples, loss } = createGrpo().score(set);
    const stats = buildTreeBatch(samples, loss).stats;
    // Tool output after the last call never reaches a prompt, so it is not in the batch.
    let unique = 300;
    for (const g of b.groups) {
      const first = b.trajectories.find((t) => t.program.id === g.programIds[0])!;
      unique += first.calls[0]!.promptTokenIds.length - 300;
    }
    for (const t of b.trajectories) {
      const last = t.calls[t.calls.length - 1]!;
      unique += last.promptTokenIds.length + last.outputTokenIds.length - t.calls[0]!.promptTokenIds.length;
    }
    expect(stats.treeTokens).toBe(unique);
    expect(stats.flatTokens).toBe(samples.reduce((a, s) => a + s.tokenIds.length, 0));
    expect(stats.treeTokenRatio).toBeGreaterThan(3);
    // Merged: one sample per program (no resets), and the same tree.
    const merged = createGrpo().score(buildSampleSet(b.trajectories, b.groups, "merged"));
    expect(merged.samples).toHaveLength(24);
    expect(buildTreeBatch(merged.samples, merged.loss).stats.treeTokens).toBe(unique);
  });

  it("context resets start new segments", () => {
    const b = syntheticSweBatch({ seed: 5, resetProbability: 0.5, turns: [6, 6], tasks: 1 });
    const resets = b.trajectories.reduce((a, t) => a + t.calls.filter((c) => c.contextReset).length, 0);
    expect(resets).toBeGreaterThan(0);
    expect(buildSampleSet(b.trajectories, b.groups, "merged").samples).toHaveLength(8 + resets);
    expect(() => syntheticSweBatch({ seed: 1, turns: [3, 2] })).toThrow(/turns must be integers/);
  });

  it("siblings share their first turns only while their actions coincide, and fork on a token of their own where they leave", () => {
    // Turns a program spends on its group's common path: those before the one whose output starts with its fork token.
    const onPath = (b: ReturnType<typeof syntheticSweBatch>): number[] =>
      b.trajectories.map((t, s) => {
        const leave = t.calls.findIndex((c) => c.outputTokenIds[0] === 1 + s);
        return leave < 0 ? t.calls.length : leave;
      });
    const never = syntheticSweBatch({ seed: 4, tasks: 1, groupSize: 16, turns: [5, 5] });
    expect(onPath(never)).toEqual(new Array(16).fill(0));
    const always = syntheticSweBatch({ seed: 4, tasks: 1, groupSize: 16, turns: [5, 5], coincideProbability: 1 });
    expect(onPath(always)).toEqual(new Array(16).fill(5));
    for (const t of always.trajectories) expect(t.calls.map((c) => c.promptTokenIds.concat(c.outputTokenIds))).toEqual(always.trajectories[0]!.calls.map((c) => c.promptTokenIds.concat(c.outputTokenIds)));
    const some = syntheticSweBatch({ seed: 4, tasks: 1, groupSize: 16, turns: [6, 6], coincideProbability: 0.6 });
    const k = onPath(some);
    expect(k.some((x) => x > 0) && k.some((x) => x === 0)).toBe(true);
    some.trajectories.forEach((a, s) =>
      some.trajectories.forEach((b, u) => {
        const both = Math.min(k[s]!, k[u]!);
        for (let i = 0; i < both; i++) expect(a.calls[i]!.outputTokenIds).toEqual(b.calls[i]!.outputTokenIds);
        // Same actions so far, so the same tool results: the prompt where the first of them leaves is shared.
        if (both < 6) expect(a.calls[both]!.promptTokenIds).toEqual(b.calls[both]!.promptTokenIds);
        if (s !== u && k[s]! < 6) expect(a.calls[k[s]!]!.outputTokenIds[0]).not.toBe(b.calls[k[s]!]!.outputTokenIds[0]);
      }),
    );
    expect(() => syntheticSweBatch({ seed: 1, coincideProbability: 1.5 })).toThrow(/coincideProbability must be in \[0, 1\]/);
  });
});
