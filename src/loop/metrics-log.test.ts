import { appendFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import type { IterationResult } from "./iteration-result.js";
import type { HeldOutScore } from "./held-out-eval.js";
import { MetricsLog, metricsRecord, tensorboardScalars } from "./metrics-log.js";

const base: IterationResult = {
  iteration: 2,
  runId: "r-it2",
  stats: { programs: 4, unfinished: 0, calls: 8, promptTokens: 400, outputTokens: 100, terminations: { completed: 3, max_turns: 1 } as IterationResult["stats"]["terminations"], rewarded: 4, meanReward: 0.25 },
  rewardComponents: { outcome: 0.25, process: 0 },
  batchPath: "/out/batch-it2.jsonl",
  samples: 4,
  toolCalls: 5,
  rolloutMs: 2000,
  trainMs: 300,
  policyVersion: 1,
};

describe("metrics.jsonl", () => {
  it("a reference-trainer iteration: its update, throughput and per-program lengths", () => {
    const rec = metricsRecord(
      { ...base, update: { stepped: true, version: 2, loss: -0.5, gradNorm: 3, clipFraction: 0.1, lr: 3e-4, kl: 0.02, entropy: 1.5, samples: 4, trainedSamples: 3, treeTokens: 50, flatTokens: 120, droppedGroups: 0 }, staleness: { mean: 0, max: 0, versions: [1] } },
      "iteration",
      1234,
    );
    expect(rec).toMatchObject({ kind: "iteration", index: 2, time: 1234, policyVersion: 1, policyVersionAfter: 2, loss: -0.5, gradNorm: 3, clipFraction: 0.1, lr: 3e-4, kl: 0.02, entropy: 1.5, trainedSamples: 3, treeTokens: 50, flatTokens: 120, stepped: true });
    // 100 output tokens in 2 s of rollout, over 4 programs.
    expect(rec.outputTokensPerSecond).toBe(50);
    expect(rec.meanOutputTokens).toBe(25);
    expect(rec.stalenessMax).toBe(0);
    expect(rec.entropy).toBe(1.5);
    expect(tensorboardScalars(rec)).toMatchObject({ "train/entropy": 1.5, "train/kl": 0.02 });
  });

  it("an external trainer's unknown loss is null (JSON has no NaN), and a run without training has null updates", () => {
    const ext = metricsRecord({ ...base, update: { stepped: true, version: 2, loss: NaN, gradNorm: NaN, clipFraction: NaN, kl: NaN, entropy: NaN, samples: 4, trainedSamples: 4, treeTokens: 0, flatTokens: 0, droppedGroups: 0, external: true } }, "step", 1);
    expect([ext.loss, ext.gradNorm, ext.clipFraction, ext.kl, ext.entropy, ext.lr]).toEqual([null, null, null, null, null, null]);
    expect(JSON.parse(JSON.stringify(ext))).toEqual(ext);
    const none = metricsRecord({ ...base, stats: { ...base.stats, meanReward: null } }, "iteration", 1);
    expect([none.loss, none.policyVersionAfter, none.stepped, none.meanReward, none.stalenessMean]).toEqual([null, null, null, null, null]);
  });

  it("the log starts empty and gets one line per append", () => {
    const dir = join(mkdtempSync(join(tmpdir(), "arbor-metrics-")), "sub");
    const path = join(dir, "metrics.jsonl");
    const clock = new VirtualClock(5);
    const log = new MetricsLog(dir, clock);
    expect(readFileSync(path, "utf8")).toBe("");
    log.append(base, "iteration");
    clock.advance(1);
    log.append({ ...base, iteration: 3 }, "iteration");
    expect(readFileSync(path, "utf8").trim().split("\n").map((l) => [JSON.parse(l).index, JSON.parse(l).time])).toEqual([[2, 5], [3, 6]]);
    new MetricsLog(dir, clock);
    expect(readFileSync(path, "utf8")).toBe("");
  });

  it("held-out scores: on the step's line and scalars, and the starting version's as a line of its own", () => {
    const start: HeldOutScore = { version: 0, solved: { mean: 0.25, se: 0.05, n: 8 }, baseVersion: 0, tasks: 8, samples: 2, temperature: 1 };
    const later: HeldOutScore = { ...start, version: 2, solved: { mean: 0.375, se: 0.06, n: 8 }, diff: { mean: 0.125, se: 0.03, n: 8 } };
    const rec = metricsRecord({ ...base, heldOut: later, evalMs: 2500 }, "iteration", 1);
    expect([rec.trainMs, rec.evalMs]).toEqual([300, 2500]);
    expect(tensorboardScalars(rec)).toMatchObject({ "time/train_ms": 300, "time/eval_ms": 2500 });
    expect(metricsRecord(base, "iteration", 1).evalMs).toBeNull();
    expect(tensorboardScalars(metricsRecord(base, "iteration", 1))).not.toHaveProperty("time/eval_ms");
    expect(rec.heldOut).toEqual({ version: 2, solved: 0.375, solvedSe: 0.06, baseVersion: 0, diff: 0.125, diffSe: 0.03, tasks: 8, samples: 2, temperature: 1 });
    expect(tensorboardScalars(rec)).toMatchObject({ "heldout/solved": 0.375, "heldout/solved_se": 0.06, "heldout/diff": 0.125, "heldout/diff_se": 0.03, "heldout/version": 2 });
    expect(metricsRecord(base, "iteration", 1).heldOut).toBeNull();
    expect(Object.keys(tensorboardScalars(metricsRecord(base, "iteration", 1))).some((k) => k.startsWith("heldout/"))).toBe(false);
    const dir = mkdtempSync(join(tmpdir(), "arbor-metrics-"));
    const log = new MetricsLog(dir, new VirtualClock(9));
    log.appendHeldOut(start);
    log.append({ ...base, heldOut: later }, "iteration");
    const lines = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(lines[0]).toEqual({ kind: "held-out", index: 0, time: 9, policyVersion: 0, heldOut: { version: 0, solved: 0.25, solvedSe: 0.05, baseVersion: 0, diff: null, diffSe: null, tasks: 8, samples: 2, temperature: 1 } });
    expect(lines[1].heldOut.diff).toBe(0.125);
  });
});

describe("metrics.jsonl of a resumed run", () => {
  it("keeps the lines of the iterations done and drops a later one a kill left unrecorded", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-metrics-resume-"));
    const clock = new VirtualClock(0);
    const first = new MetricsLog(dir, clock);
    for (const iteration of [1, 2, 3]) first.append({ ...base, iteration }, "iteration");
    // The run recorded 2 iterations as done: iteration 3's line goes, 1 and 2 stay, the resumed run appends.
    const resumed = new MetricsLog(dir, clock, [], 2);
    resumed.append({ ...base, iteration: 3, runId: "r-it3-r1" }, "iteration");
    const lines = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { index: number; runId: string });
    expect(lines.map((l) => [l.index, l.runId])).toEqual([[1, "r-it2"], [2, "r-it2"], [3, "r-it3-r1"]]);
    // A fresh run into the same folder starts a new log.
    new MetricsLog(dir, clock);
    expect(readFileSync(join(dir, "metrics.jsonl"), "utf8")).toBe("");
  });

  it("drops a line the kill cut in the middle (it threw a SyntaxError on resume)", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-metrics-cut-"));
    const clock = new VirtualClock(0);
    const first = new MetricsLog(dir, clock);
    for (const iteration of [1, 2]) first.append({ ...base, iteration }, "iteration");
    const whole = readFileSync(join(dir, "metrics.jsonl"), "utf8");
    appendFileSync(join(dir, "metrics.jsonl"), JSON.stringify({ kind: "iteration", index: 3 }).slice(0, 20));
    new MetricsLog(dir, clock, [], 2);
    expect(readFileSync(join(dir, "metrics.jsonl"), "utf8")).toBe(whole);
  });
});
