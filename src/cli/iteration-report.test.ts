import { describe, expect, it } from "vitest";
import type { Trajectory } from "../core/types.js";
import { batchStats, meanRewardComponents, type IterationResult } from "../loop/iteration-result.js";
import type { RlUpdate } from "../loop/rl-update.js";
import type { HeldOutScore } from "../loop/held-out-eval.js";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { metricsRecord } from "../loop/metrics-log.js";
import { earlierPlotPoints, heldOutIncompleteLine, heldOutPoints, heldOutText, iterationLine, summaryTrainingRows, writeRewardPlot } from "./iteration-report.js";
import { rewardPlotSvg } from "./reward-plot.js";
import type { RunSummary } from "./run.js";

function trajectory(components: Record<string, number> | undefined): Trajectory {
  const total = Object.values(components ?? {}).reduce((a, b) => a + b, 0);
  return {
    program: { id: "p", runId: "r", groupId: "g", taskId: "t", sampleIndex: 0, state: "terminated", createdAt: 0 },
    calls: [],
    tools: [],
    ...(components ? { reward: { total, components } } : {}),
  } as Trajectory;
}

function iteration(k: number, reward: number, components: Record<string, number>, update?: Partial<RlUpdate>): IterationResult {
  return {
    iteration: k,
    runId: `r-it${k}`,
    stats: { ...batchStats([]), meanReward: reward },
    rewardComponents: components,
    batchPath: "b.jsonl",
    samples: 4,
    toolCalls: 2,
    rolloutMs: 1500,
    trainMs: 500,
    policyVersion: k - 1,
    ...(update
      ? { update: { stepped: true, version: k, loss: 0.1234, gradNorm: 0.5, clipFraction: 0, kl: 0, entropy: 2, samples: 4, trainedSamples: 3, treeTokens: 10, flatTokens: 30, droppedGroups: 0, ...update } }
      : {}),
  };
}

describe("iteration report", () => {
  it("says an evaluation the run's stop cut short has no score, with how many of its programs ended", () => {
    expect(heldOutIncompleteLine(3, 5, 12)).toBe("eval     v3 incomplete: 5 of 12 held-out programs ended with an outcome before the run stopped; no score");
    expect(heldOutIncompleteLine(3, 5, 12)).not.toMatch(/solved|%/);
  });

  it("averages each reward component over the rewarded trajectories (missing components count 0)", () => {
    const m = meanRewardComponents([trajectory({ outcome: 1, process: -0.5 }), trajectory({ outcome: 0 }), trajectory(undefined)]);
    expect(m).toEqual({ outcome: 0.5, process: -0.25 });
    expect(meanRewardComponents([])).toEqual({});
  });

  it("prints the components beside the reward, the loss of a reference step and 'external trainer' for an external one", () => {
    const line = iterationLine(iteration(2, 0.25, { outcome: 0.5, process: -0.25 }, {}), 6);
    expect(line).toMatch(/^iteration 2\/6 {2}reward 0\.250 \(outcome 0\.500, process -0\.250\) {2}loss 0\.1234 {2}grad 0\.500 /);
    expect(line).toContain("policy v1 → v2");
    const ext = iterationLine(iteration(2, 0.25, { outcome: 0.25 }, { external: true, loss: NaN, gradNorm: NaN }), 6);
    expect(ext).toMatch(/^iteration 2\/6 {2}reward 0\.250 {2}external trainer {2}tokens 10 tree \/ 30 flat/);
    expect(ext).not.toContain("NaN");
    const none = iterationLine(iteration(3, 0, { outcome: 0 }, { stepped: false, external: true }), 6);
    expect(none).toContain("no step (the external trainer acked without new weights; 3/4 samples with an advantage)");
  });

  it("adds a row per component to the summary of a training run", () => {
    const s = {
      iterations: [iteration(1, -0.2, { outcome: 0.1, process: -0.3 }), iteration(2, 0.3, { outcome: 0.4, process: -0.1 })],
      rewardPlot: "/tmp/reward.svg",
      policyVersion: 2,
    } as RunSummary;
    const rows = Object.fromEntries(summaryTrainingRows(s));
    expect(rows.reward).toMatch(/^-0\.200 → 0\.300 /);
    expect(rows["  outcome"]).toMatch(/^0\.100 → 0\.400 /);
    expect(rows["  process"]).toMatch(/^-0\.300 → -0\.100 /);
    expect(rows.iterations).toBe("2, policy v0 → v2");
  });

  it("shows the held-out score on the iteration line and first → last with the paired difference in the summary", () => {
    const v0: HeldOutScore = { version: 0, solved: { mean: 0.25, se: 0.041, n: 32 }, baseVersion: 0, tasks: 32, samples: 4, temperature: 1 };
    const v2: HeldOutScore = { ...v0, version: 2, solved: { mean: 0.3125, se: 0.045, n: 32 }, diff: { mean: 0.0625, se: 0.02, n: 32 } };
    const v3: HeldOutScore = { ...v0, version: 3, solved: { mean: 0.3, se: 0.044, n: 32 }, diff: { mean: 0.05, se: 0.021, n: 32 } };
    expect(heldOutText(v0)).toBe("held-out v0 solved 25.0% ± 4.1 (32 tasks × 4)");
    expect(heldOutText(v3)).toBe("held-out v3 solved 30.0% ± 4.4  Δ vs v0 +5.0 ± 2.1 pts (32 tasks × 4)");
    expect(heldOutText({ ...v3, diff: { mean: -0.05, se: 0.021, n: 32 } })).toContain("Δ vs v0 -5.0 ± 2.1 pts");
    const it2 = { ...iteration(2, 0.3, { outcome: 0.3 }, {}), heldOut: v2, evalMs: 29_500 };
    // The evaluation's time is its own, after the score: the training step's is `train` (0.5 s here).
    expect(iterationLine(it2, 3)).toMatch(/train 0\.5 s {2}policy v1 → v2 {2}held-out v2 solved 31\.3% ± 4\.5 {2}Δ vs v0 \+6\.3 ± 2\.0 pts \(32 tasks × 4\) {2}eval 29\.5 s$/);
    expect(iterationLine(iteration(1, 0.3, { outcome: 0.3 }, {}), 3)).not.toContain("held-out");
    const rows = Object.fromEntries(summaryTrainingRows({ iterations: [iteration(1, 0, { outcome: 0 }), it2], rewardPlot: "/r.svg", policyVersion: 3, heldOut: [v0, v2, v3] }));
    expect(rows["held-out"]).toBe("solved v0 25.0% ± 4.1 → v3 30.0% ± 4.4, paired Δ +5.0 ± 2.1 pts (32 tasks × 4 samples, temperature 1, never trained on)");
    expect(rows["  versions"]).toMatch(/^v0 25\.0% {2}v2 31\.3% {2}v3 30\.0% {2}/);
    expect(summaryTrainingRows({ iterations: [it2], rewardPlot: "/r.svg" }).some(([k]) => k === "held-out")).toBe(false);
    // An async run's points are trainer steps, and its summary says so.
    expect(summaryTrainingRows({ iterations: [it2], rewardPlot: "/r.svg" })[0]?.[0]).toBe("iterations");
    expect(summaryTrainingRows({ iterations: [it2], rewardPlot: "/r.svg", async: true })[0]).toEqual(["steps", "1, policy v1 → v0"]);
    // The plot's points: version 0 at iteration 0, then each scored step's version at its iteration.
    expect(heldOutPoints([iteration(1, 0, {}), it2], v0)).toEqual([
      { iteration: 0, version: 0, solved: 0.25, se: 0.041 },
      { iteration: 2, version: 2, solved: 0.3125, se: 0.045 },
    ]);
  });
});

describe("a resumed run's reward plot", () => {
  it("draws the iterations before the resume from metrics.jsonl, then this process's, the starting score first", () => {
    const v0: HeldOutScore = { version: 0, solved: { mean: 0.25, se: 0.04, n: 8 }, baseVersion: 0, tasks: 8, samples: 1, temperature: 1 };
    const v1: HeldOutScore = { ...v0, version: 1, solved: { mean: 0.5, se: 0.05, n: 8 }, diff: { mean: 0.25, se: 0.1, n: 8 } };
    const v3: HeldOutScore = { ...v0, version: 3, solved: { mean: 0.625, se: 0.05, n: 8 }, diff: { mean: 0.375, se: 0.1, n: 8 } };
    const dir = mkdtempSync(join(tmpdir(), "arbor-plot-"));
    const it1 = { ...iteration(1, 0.25, { outcome: 0.25 }), heldOut: v1 };
    const it2 = iteration(2, 0.5, { outcome: 0.5 });
    const it3 = { ...iteration(3, 0.75, { outcome: 0.75 }), heldOut: v3 };
    const metrics = join(dir, "metrics.jsonl");
    // The held-out line, the two iterations done before the resume, a line a kill cut, and one past them.
    const lines = [{ kind: "held-out", index: 0, heldOut: { version: 0, solved: 0.25, solvedSe: 0.04 } }, metricsRecord(it1, "iteration", 1), metricsRecord(it2, "iteration", 2)];
    writeFileSync(metrics, `${lines.map((l) => JSON.stringify(l)).join("\n")}\n{"kind":"itera\n${JSON.stringify(metricsRecord(it3, "iteration", 3))}\n`);
    const earlier = earlierPlotPoints(metrics, 3);
    expect(earlier).toEqual({
      points: [
        { iteration: 1, meanReward: 0.25, components: { outcome: 0.25 } },
        { iteration: 2, meanReward: 0.5, components: { outcome: 0.5 } },
      ],
      heldOut: [{ iteration: 1, version: 1, solved: 0.5, se: 0.05 }],
      firstPolicyVersion: 0,
    });
    const svg = readFileSync(writeRewardPlot(dir, [it3], v0, earlier), "utf8");
    const whole = heldOutPoints([it1, it2, it3], v0);
    expect(svg).toBe(rewardPlotSvg([1, 2, 3].map((k) => ({ iteration: k, meanReward: k / 4, components: { outcome: k / 4 } })), undefined, whole));
    expect(earlierPlotPoints(join(dir, "none.jsonl"), 3)).toEqual({ points: [], heldOut: [], firstPolicyVersion: null });
    // The summary's rows are the whole run's too, saying how many iterations this process ran.
    const rows = Object.fromEntries(summaryTrainingRows({ iterations: [it3], rewardPlot: "/r.svg", policyVersion: 3, earlier }));
    expect(rows.iterations).toBe("3 (1 after the resume), policy v0 → v3");
    expect(rows.reward).toMatch(/^0\.250 → 0\.750 {2}\S{3} {2}\(0\.25 0\.50 0\.75\)$/);
  });
});
