// A real run's store as a SimReport: a sync run of two iterations (one store run each) beside its held-out
// evaluation (a held-out group in its second store run, and an older store's `-eval` run) and an older run, written through the SQLite store with known times, calls and output lengths, and a
// metrics.jsonl with trainer steps. The figures are worked out by hand from what was written.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../../core/types.js";
import { SqliteTrajectoryStore } from "../../store/sqlite-store.js";
import type { TrajectoryStore } from "../../store/trajectory-store.js";
import { fixtureCall, fixtureGroup, fixtureProgram } from "../../testing/store-fixtures.js";
import { runSimReport, throughputSeries } from "./run-sim-report.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-run-report-"));
let store: TrajectoryStore;
const T0 = 1_000_000;

/** A call of `programId` with `tokens` output tokens over [start, end] ms after T0. */
function call(programId: string, index: number, tokens: number, start: number, end: number, finishReason: Call["finishReason"] = "stop"): Call {
  const c = fixtureCall(programId, index, Array.from({ length: tokens }, (_, i) => -(i + 1) / 10));
  return { ...c, finishReason, timings: { start: T0 + start, end: T0 + end } };
}

type Programs = { calls: [number, number, number, Call["finishReason"]?][]; end: number }[];

/** Programs of group `g`, each making the given calls and ending at the given time (ms after T0). */
async function programsOf(g: ReturnType<typeof fixtureGroup>, startedAt: number, programs: Programs): Promise<void> {
  for (const [i, p] of programs.entries()) {
    const pid = g.programIds[i]!;
    await store.createProgram({ ...fixtureProgram(g, i), createdAt: T0 + startedAt });
    for (const [k, [tokens, s, e, fin]] of p.calls.entries()) await store.recordCall(call(pid, k, tokens, s, e, fin));
    await store.endProgram(pid, { kind: "completed" }, T0 + p.end);
  }
}

/** A run whose programs each make the given calls and end at the given time (ms after T0); `heldOut`: a held-out evaluation group of it. */
async function run(id: string, name: string, startedAt: number, programs: Programs, heldOut: Programs = []): Promise<void> {
  const config = { name: "calc-run", seed: 5, engines: [{ name: "e0" }, { name: "e1" }], env: { name: "calc" }, rollout: { groupSize: 2, mode: "sync" }, gateway: { routing: "sticky-program" } };
  await store.createRun({ id, name, configJson: JSON.stringify(config), startedAt: T0 + startedAt });
  const g = fixtureGroup(`${id}-g`, id, programs.length);
  await store.createGroup(g);
  await programsOf(g, startedAt, programs);
  if (heldOut.length > 0) {
    const h = { ...fixtureGroup(`${id}/eval-v1/g0`, id, heldOut.length), heldOutVersion: 1 };
    await store.createGroup(h);
    await programsOf(h, startedAt, heldOut);
  }
  await store.finishRun(id, T0 + Math.max(...programs.map((p) => p.end)));
}

beforeAll(async () => {
  store = new SqliteTrajectoryStore(join(dir, "store.sqlite"));
  // An older run of another id: not reported unless asked for.
  await run("old", "older", -50_000, [{ calls: [[7, -50_000, -49_000]], end: -48_000 }]);
  // Iteration 1: programs end at 4 s and 10 s; iteration 2 (starting at 10 s): at 14 s and 20 s.
  await run("calc-it1", "calc-run", 0, [
    { calls: [[10, 0, 1000], [20, 2000, 4000]], end: 4000 },
    { calls: [[30, 0, 3000], [40, 5000, 10_000, "length"]], end: 10_000 },
  ]);
  await run("calc-it2", "calc-run", 10_000, [
    { calls: [[50, 10_000, 14_000]], end: 14_000 },
    { calls: [[60, 10_000, 12_000], [0, 15_000, 20_000, "abort"]], end: 20_000 },
  ], [{ calls: [[77, 11_000, 13_000]], end: 13_000 }]);
  await run("calc-eval", "calc-run (held-out evaluation)", 20_000, [{ calls: [[99, 20_000, 30_000]], end: 30_000 }]);
  writeFileSync(
    join(dir, "metrics.jsonl"),
    [
      { kind: "step", index: 1, runId: "calc-it1", time: T0 + 10_000, stalenessMean: 0.5 },
      { kind: "step", index: 2, runId: "calc-it2", time: T0 + 20_000, stalenessMean: 1.5 },
      { kind: "step", index: 1, runId: "old", time: T0 - 48_000, stalenessMean: 9 },
    ]
      .map((x) => JSON.stringify(x))
      .join("\n") + "\n{\"kind\":\"step\",\"trunc",
  );
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("runSimReport", () => {
  it("reads the latest run's iterations as one system: calls as requests, programs, times since the run's start", async () => {
    const r = await runSimReport(store, { label: "test store", runDir: dir });
    expect(r.workload).toMatchObject({ name: "calc-run", kind: "replay" });
    expect(r.workload.scale).toMatchObject({ runId: "calc", storeRuns: 2, programs: 4, calls: 7, engines: 2, groupSize: 2, env: "calc", kvUsage: "not recorded by a real run" });
    expect(r.workload.description).toContain("the store holds 1 other run; --run picks one");
    expect(r.workload.scale.heldOutCalls).toBe("1, of the held-out evaluation: in none of these figures");
    expect(r.workload.sources[0]).toBe("store test store: runs calc-it1, calc-it2");
    expect(r.seed).toBe(5);
    expect(r.baseline).toBe("calc-run");
    expect(r.systems).toHaveLength(1);
    const s = r.systems[0]!;
    expect(s.system).toBe("calc-run");
    // Seven calls, one aborted (the held-out evaluation's calls are not the rollout's).
    expect(s.summary).toMatchObject({ requests: 7, completed: 6, aborted: 1, programs: 4, outputTokens: 210, makespanMs: 20_000, preemptions: 0, peakKvUsage: 0 });
    // Iterations of 10 s each.
    expect(s.summary.iterationMs).toBe(10_000);
    expect(s.summary.throughputTokensPerS).toBeCloseTo(210 / 20, 9);
    expect(s.summary.stepsPerMin).toBeCloseTo(7 / (20 / 60), 9);
    // Program ends 4 and 10 s after iteration 1's start, 4 and 10 s after iteration 2's (at 10 s): pooled, the
    // CDF's percentiles interpolate between 4, 4, 10 and 10 s (since the run's start, 14 and 20 s would be its tail).
    expect(s.completionPercentilesMs[0]).toBe(4000);
    expect(s.completionPercentilesMs[100]).toBe(10_000);
    expect(s.summary.p50Ms).toBe(7000);
    expect(s.completionPercentilesMs[40]).toBeCloseTo(5200, 6);
    expect(s.summary.p90Ms).toBe(10_000);
    expect(s.summary.tailMs).toBe(0);
    expect(r.workload.description).toContain("end times since their iteration's start (2 iterations pooled)");
    // Staleness of the run's own trainer steps, the cut line skipped.
    expect(s.series.staleness).toEqual([{ tMs: 10_000, value: 0.5 }, { tMs: 20_000, value: 1.5 }]);
    expect(s.summary.meanStaleness).toBe(1);
    expect(s.series.kvUsage).toEqual({});
    // The throughput buckets hold every output token.
    const width = s.series.throughput[1]!.tMs - s.series.throughput[0]!.tMs;
    expect(s.series.throughput.reduce((n, p) => n + (p.value * width) / 1000, 0)).toBeCloseTo(210, 6);
    expect(r.ratios).toEqual([{ system: "calc-run", speedup: 1, throughput: 1, tailReduction: 0 }]);
  });

  it("reports another run by its id, and names the runs there are for an unknown one", async () => {
    const r = await runSimReport(store, { label: "test store", runId: "old" });
    expect(r.systems[0]!.summary).toMatchObject({ requests: 1, programs: 1, outputTokens: 7, makespanMs: 2000 });
    expect(r.workload.sources[1]).toBe("staleness: metrics.jsonl: not given");
    await expect(runSimReport(store, { label: "test store", runId: "nope" })).rejects.toThrow("report: run 'nope' is not in test store (runs: old, calc)");
  });
});

describe("runSimReport of a run with one id (its groups record their iteration)", () => {
  it("times each iteration by its own groups' programs, not the run as one iteration", async () => {
    const own = new SqliteTrajectoryStore(join(dir, "one-id.sqlite"));
    const saved = store;
    store = own;
    try {
      await store.createRun({ id: "one", name: "one-run", configJson: "{}", startedAt: T0 });
      const ends = [4000, 10_000, 16_000, 22_000];
      // A first attempt at iteration 2 a kill cut at 11 s (one call made): the resumed run rolled it out again.
      const cut = { ...fixtureGroup("one/it2/g0", "one", 1), iteration: 2 };
      for (const k of [1, 2]) {
        const g = { ...fixtureGroup(`one/it${k}${k === 2 ? "-r1" : ""}/g0`, "one", 2), iteration: k, ...(k === 2 ? { attempt: 1 } : {}) };
        if (k === 2) {
          await store.createGroup(cut);
          await programsOf(cut, 10_500, [{ calls: [[9, 10_500, 11_000, "abort"]], end: 11_000 }]);
        }
        await store.createGroup(g);
        // Iteration 1 runs 0-10 s; iteration 2's programs are created at 12 s and end at 16 s and 22 s.
        const start = k === 1 ? 0 : 12_000;
        await programsOf(g, start, [0, 1].map((i) => ({ calls: [[5, start, ends[2 * (k - 1) + i]!]], end: ends[2 * (k - 1) + i]! })));
      }
      const r = await runSimReport(store, { label: "one store" });
      // 10 s and 10 s: not the 22 s from the run's start to its last end, nor 11.5 s from the cut attempt's start.
      expect(r.systems[0]!.summary.iterationMs).toBe(10_000);
      expect(r.systems[0]!.summary.makespanMs).toBe(22_000);
      expect(r.systems[0]!.summary).toMatchObject({ requests: 4, programs: 4, outputTokens: 20 });
      expect(r.workload.scale.cutCalls).toBe("1, of what a kill cut and the resumed run rolled out again: in none of these figures");
      expect(r.workload.scale.heldOutCalls).toBeUndefined();
    } finally {
      store = saved;
      await own.close();
    }
  });
});

describe("throughputSeries", () => {
  it("spreads a call's tokens over the buckets its time spans", () => {
    const calls = [call("p", 0, 100, 0, 1000), call("p", 1, 50, 1500, 1500)];
    const s = throughputSeries(calls, T0, 2000);
    // 2 s span: 100 ms buckets; the first call gives 10 tokens to each of its ten, the second 50 to one.
    expect(s).toHaveLength(20);
    expect(s[0]).toEqual({ tMs: 0, value: 100 });
    expect(s[9]!.value).toBeCloseTo(100, 9);
    expect(s[15]).toEqual({ tMs: 1500, value: 500 });
    expect(s[12]!.value).toBe(0);
  });
});
