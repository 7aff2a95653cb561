import { describe, expect, it } from "vitest";
import { generateSeerWorkload, SEER_TABLE3, type SeerWorkloadOptions } from "./seer-workload.js";

const opts: SeerWorkloadOptions = {
  groups: 40,
  groupSize: 8,
  maxTokens: 4096,
  meanRatio: SEER_TABLE3.moonlight.meanTokens / SEER_TABLE3.moonlight.maxTokens,
  promptTokens: [10, 20],
  groupSigma: 0.8,
  sampleSigma: 0.5,
  vocabSize: 1000,
  minTokenId: 3,
  seed: 9,
};

describe("Seer-like workload", () => {
  it("hits Table 3's mean/max ratio with heavy-tailed lengths capped at the max, deterministically", () => {
    const tasks = generateSeerWorkload(opts);
    expect(tasks).toHaveLength(40);
    const lens = tasks.flatMap((t) => t.oracleLengths);
    expect(lens).toHaveLength(320);
    const mean = lens.reduce((a, b) => a + b, 0) / lens.length;
    expect(Math.abs(mean / opts.maxTokens - opts.meanRatio)).toBeLessThan(0.005);
    expect(Math.min(...lens)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...lens)).toBe(opts.maxTokens); // the cap is reached: a real tail
    const median = [...lens].sort((a, b) => a - b)[160] as number;
    expect(median).toBeLessThan(mean); // right-skewed
    for (const t of tasks) {
      expect(t.promptTokenIds).toHaveLength(t.promptTokens);
      expect(t.promptTokens).toBeGreaterThanOrEqual(10);
      expect(t.promptTokens).toBeLessThanOrEqual(20);
      expect(t.promptTokenIds.every((x) => x >= 3 && x < 1000)).toBe(true);
    }
    expect(generateSeerWorkload(opts)).toEqual(tasks);
  });

  it("correlates lengths within a group (what Seer's estimate relies on)", () => {
    const tasks = generateSeerWorkload({ ...opts, groups: 200 });
    const logs = tasks.map((t) => t.oracleLengths.map(Math.log));
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const all = logs.flat();
    const total = mean(all.map((x) => (x - mean(all)) ** 2));
    const within = mean(logs.flatMap((g) => g.map((x) => (x - mean(g)) ** 2)));
    expect(within / total).toBeLessThan(0.6);
  });

  it("rejects bad options with the field named", () => {
    expect(() => generateSeerWorkload({ ...opts, groups: 0 })).toThrow(/groups must be an integer >= 1/);
    expect(() => generateSeerWorkload({ ...opts, meanRatio: 1.2 })).toThrow(/meanRatio must be in \(0, 1\)/);
    expect(() => generateSeerWorkload({ ...opts, promptTokens: [5, 2] })).toThrow(/promptTokens must be integers/);
  });
});
