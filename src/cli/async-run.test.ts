// `arbor run` with rollout.mode: async end to end on the real stack: the shipped SFT policy on two
// llama.cpp engines behind the gateway, bwrap sandboxes, SQLite store, the reference trainer taking
// the orchestrator's batches and the engines reloading each new checkpoint while rollout goes on.
import { chmodSync, existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackendReply } from "../backends/backend.js";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { readManifest } from "../trainer/checkpoint.js";
import type { ProgramResult } from "../rollout/sync-rollout.js";
import { runIteration, type RunSummary } from "./run.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { startFakeMlflow, type FakeMlflow } from "../testing/fake-mlflow.js";
import { startFakeWandb, type FakeWandb } from "../testing/fake-wandb.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-async-run-"));
// Sandboxes run as uid 65534 when we are root: their root must be reachable by it.
chmodSync(dir, 0o755);
const out = join(dir, "out");
const STEPS = 2;
const ETA = 1;
// Two groups per batch: a single group of four often gets one reward, leaving the step nothing to learn.
const B = 2;
const W = 4;
const replies: number[] = [];
const lines: string[] = [];
const done: ProgramResult[] = [];
let summary: RunSummary;

let mlflow: FakeMlflow;
let wandb: FakeWandb;

beforeAll(async () => {
  mlflow = await startFakeMlflow();
  wandb = await startFakeWandb();
  process.env.WANDB_API_KEY = wandb.apiKey;
  const cfg = parseRunConfig(
    smallRlConfig(dir, "async-e2e", {
      seed: 3,
      engines: [
        { name: "e0", sequences: 2, contextSize: 1024, inFlightOnWeightSwitch: "finish" },
        { name: "e1", sequences: 2, contextSize: 1024, inFlightOnWeightSwitch: "finish" },
      ],
      env: { name: "calc", tasks: B, seed: 7 },
      rollout: { mode: "async", groupSize: 4, concurrency: 4, batchGroups: B, maxInFlightGroups: 2 * B, window: W, maxStaleness: ETA },
      iterations: STEPS,
      output: { dir: out },
      tracking: { mlflow: { url: mlflow.url, experiment: "async-e2e" }, wandb: { project: "async-e2e", baseUrl: wandb.url } },
    }),
  );
  summary = await runIteration(cfg, {
    progress: false,
    runId: "async-e2e",
    log: (line) => lines.push(line),
    onProgramDone: (p) => done.push(p),
    onBackendReply: (_backend: string, reply: BackendReply) => {
      if (reply.status === 200) replies.push(reply.json.policy_version as number);
    },
  });
}, 300_000);

afterAll(async () => {
  delete process.env.WANDB_API_KEY;
  await mlflow.close();
  await wandb.close();
});

describe("arbor run with rollout.mode: async (end to end)", () => {
  it("takes one trainer step per batch and ends with every engine on the last version", async () => {
    expect(summary.iterations).toHaveLength(STEPS);
    expect(summary.iterations.map((r) => r.update?.stepped)).toEqual([true, true]);
    expect(summary.iterations.map((r) => r.policyVersion)).toEqual([0, 1]);
    expect(summary.iterations.map((r) => r.update?.version)).toEqual([1, 2]);
    expect(summary.policyVersion).toBe(STEPS);
    expect(summary.engineVersions).toEqual([STEPS, STEPS]);
    expect(readManifest(join(out, "checkpoints"))?.version).toBe(STEPS);
    // Calls were served by the policies the trainer published, never by one it had not yet.
    expect(replies.length).toBeGreaterThan(0);
    for (const v of replies) expect(v).toBeGreaterThanOrEqual(0);
    for (const v of replies) expect(v).toBeLessThanOrEqual(STEPS);
  });

  it("gives every admitted program an outcome, in the store and to onProgramDone", async () => {
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      const ts = await store.listTrajectories(summary.runId);
      expect((await store.stats(summary.runId)).unfinished).toBe(0);
      expect(ts.length).toBeGreaterThanOrEqual(STEPS * B * 4);
      expect(ts.every((t) => t.program.termination !== undefined)).toBe(true);
      expect(done.map((p) => p.programId).sort()).toEqual(ts.map((t) => t.program.id).sort());
      expect(summary.stats.programs).toBe(ts.length);
    } finally {
      await store.close();
    }
  });

  it("trains on batches within the staleness bound, each from versions no newer than the trainer's", async () => {
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      for (const r of summary.iterations) {
        const s = r.staleness!;
        expect(s.max).toBeGreaterThanOrEqual(0);
        // η bounds admission; the window lets a group be taken ⌊(W − 2)/B⌋ + 1 steps late.
        expect(s.max).toBeLessThanOrEqual(ETA + Math.floor((W - 2) / B + 1));
        expect(s.mean).toBeLessThanOrEqual(s.max);
        expect(s.versions.length).toBeGreaterThan(0);
        for (const v of s.versions) {
          expect(v).toBeLessThanOrEqual(r.policyVersion);
          expect(r.policyVersion - v).toBeLessThanOrEqual(s.max);
        }
        expect(r.stats.programs).toBe(B * 4);
        expect(r.stats.unfinished).toBe(0);
        expect(r.samples).toBeGreaterThanOrEqual(r.stats.programs);
        expect(existsSync(r.batchPath)).toBe(true);
        expect(readFileSync(r.batchPath, "utf8").trim().split("\n")).toHaveLength(r.samples);
      }
      const calls = (await store.listTrajectories(summary.runId)).flatMap((t) => t.calls);
      expect(Math.max(...calls.map((c) => c.policyVersion))).toBeLessThanOrEqual(STEPS);
    } finally {
      await store.close();
    }
  });

  it("prints a line per trainer step and writes the same reward plot as sync mode", async () => {
    const stepLines = lines.filter((l) => l.startsWith("step "));
    expect(stepLines).toHaveLength(STEPS);
    expect(stepLines[0]).toMatch(/^step 1\/2 {2}reward -?\d\.\d{3} \(outcome -?\d\.\d{3}, process -?\d\.\d{3}\) {2}loss -?\d/);
    expect(stepLines[0]).toContain("policy v0 → v1");
    expect(stepLines[0]).toMatch(/staleness mean \d\.\d{2} max \d+ {2}token versions v0/);
    expect(summary.rewardPlot).toBe(join(out, "reward.svg"));
    expect(readFileSync(summary.rewardPlot!, "utf8").match(/<circle /g)).toHaveLength(STEPS);
    // metrics.jsonl: a line per trainer step, with its staleness.
    const recs = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; index: number; stalenessMax: number | null; policyVersionAfter: number });
    expect(recs.map((r) => [r.kind, r.index, r.policyVersionAfter])).toEqual(summary.iterations.map((r, i) => ["step", i + 1, r.update?.version]));
    expect(recs.map((r) => r.stalenessMax)).toEqual(summary.iterations.map((r) => r.staleness?.max ?? null));
  });

  it("tracks the run in MLflow: one run, its config as params, each step's scalars, FINISHED", () => {
    const runs = [...mlflow.runs.values()];
    expect(runs).toHaveLength(1);
    const run = runs[0]!;
    expect(run).toMatchObject({ runName: "async-e2e", status: "FINISHED", tags: { "arbor.run_id": "async-e2e" } });
    expect(run.params).toMatchObject({ "rollout.mode": "async", "rollout.window": String(W), iterations: String(STEPS) });
    const recs = readFileSync(join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { index: number; loss: number | null; meanReward: number | null });
    for (const r of recs) {
      const at = (key: string) => run.metrics.find((m) => m.key === key && m.step === r.index)?.value;
      if (r.loss !== null) expect(at("train/loss")).toBeCloseTo(r.loss, 12);
      if (r.meanReward !== null) expect(at("reward/mean")).toBeCloseTo(r.meanReward, 12);
    }
    expect(new Set(run.metrics.map((m) => m.step))).toEqual(new Set(recs.map((r) => r.index)));
    // The same rows in W&B: one history row per step, the config, exit code 0.
    const w = [...wandb.runs.values()];
    expect(w).toHaveLength(1);
    expect(w[0]!.complete).toEqual({ exitcode: 0 });
    expect(w[0]!.config["rollout.mode"]).toEqual({ value: "async", desc: null });
    expect(w[0]!.history.map((h) => [h._step, h["train/loss"] ?? null])).toEqual(recs.map((r) => [r.index, r.loss]));
  });
});
