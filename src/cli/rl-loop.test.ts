// The RL loop end to end on the real stack, starting from the shipped SFT checkpoint: rollouts on
// llama.cpp engines through the gateway with bwrap sandboxes, GRPO batches packed as prefix trees,
// reference-trainer steps, versioned checkpoints and weight sync to both engines between iterations.
// (Whether the reward rises is not asserted: see models/README.md for what the shipped policy can do.)
import { chmodSync, existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { BackendReply } from "../backends/backend.js";
import { readManifest } from "../trainer/checkpoint.js";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { runIteration, summaryRows, type RunSummary } from "./run.js";
import { smallRlConfig } from "../testing/rl-config.js";
import { iterationTrajectories } from "../testing/iteration-trajectories.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-rl-"));
chmodSync(dir, 0o755);
const out = join(dir, "out");
const replies: { backend: string; version: number }[] = [];
const lines: string[] = [];
let summary: RunSummary;
const ITERATIONS = 3;

beforeAll(async () => {
  const cfg = parseRunConfig(smallRlConfig(dir, "rl-e2e", { iterations: ITERATIONS, output: { dir: out } }));
  summary = await runIteration(cfg, {
    progress: false,
    // A fixed run id: the store's run and program ids do not depend on the start time.
    runId: "rl-e2e",
    log: (line) => lines.push(line),
    onBackendReply: (backend: string, reply: BackendReply) => {
      if (reply.status === 200) replies.push({ backend, version: reply.json.policy_version as number });
    },
  });
}, 300_000);

describe("arbor run with training (end to end)", () => {
  it("advances the policy version with every step and records each call with the version that served it", async () => {
    const its = summary.iterations;
    expect(its).toHaveLength(ITERATIONS);
    // Iteration 1 always has signal here: the process reward differs within groups.
    expect(its[0]!.update?.stepped).toBe(true);
    for (let k = 1; k < ITERATIONS; k++) expect(its[k]!.policyVersion).toBe(its[k - 1]!.policyVersion + (its[k - 1]!.update?.stepped ? 1 : 0));
    const last = its[ITERATIONS - 1]!;
    expect(summary.policyVersion).toBe(last.policyVersion + (last.update?.stepped ? 1 : 0));
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      for (const r of its) {
        const calls = (await iterationTrajectories(store, r.runId, r.iteration)).flatMap((t) => t.calls);
        expect(calls.length).toBeGreaterThanOrEqual(16);
        expect(new Set(calls.map((c) => c.policyVersion))).toEqual(new Set([r.policyVersion]));
      }
    } finally {
      await store.close();
    }
  });

  it("has both engines serve each new version after the sync, and publishes it as a checkpoint", async () => {
    const served = new Set(summary.iterations.map((r) => r.policyVersion));
    expect(served.size).toBeGreaterThanOrEqual(2);
    for (const backend of ["e0", "e1"]) {
      const versions = replies.filter((r) => r.backend === backend).map((r) => r.version);
      expect(new Set(versions)).toEqual(served);
      // Never an old version after a newer one: the sync happens between iterations.
      expect(versions).toEqual([...versions].sort((a, b) => a - b));
    }
    const manifest = readManifest(join(out, "checkpoints"));
    expect(manifest?.version).toBe(summary.policyVersion);
    expect(existsSync(join(out, "checkpoints", `policy-v${summary.policyVersion}.gguf`))).toBe(true);
  });

  it("trains only on samples that carry an advantage, packed as a prefix tree", async () => {
    const u = summary.iterations[0]!.update!;
    expect(u.trainedSamples).toBeGreaterThan(0);
    expect(u.trainedSamples).toBeLessThanOrEqual(u.samples);
    // All programs share the calc system prompt: the tree runs far fewer tokens than flat packing.
    expect(u.treeTokens * 2).toBeLessThan(u.flatTokens);
    expect(Number.isFinite(u.loss) && u.gradNorm > 0).toBe(true);
  });

  it("prints a line per iteration and writes the reward plot and each iteration's batch", async () => {
    const iterLines = lines.filter((l) => l.startsWith("iteration "));
    expect(iterLines).toHaveLength(ITERATIONS);
    expect(iterLines[0]).toMatch(/^iteration 1\/3 {2}reward -?\d\.\d{3} \(outcome -?\d\.\d{3}, process -?\d\.\d{3}\) {2}loss -?\d/);
    expect(iterLines[0]).toContain("policy v0 → v1");
    expect(summary.rewardPlot).toBe(join(out, "reward.svg"));
    const svg = readFileSync(summary.rewardPlot!, "utf8");
    expect(svg.match(/<circle /g)).toHaveLength(ITERATIONS);
    for (const r of summary.iterations) expect(svg).toContain(`iteration ${r.iteration}: ${(r.stats.meanReward ?? 0).toFixed(3)}`);
    for (let k = 1; k <= ITERATIONS; k++) expect(existsSync(join(out, `batch-it${k}.jsonl`))).toBe(true);
  });

  it("says on the summary's counts that they are the last iteration's, not the run's", () => {
    const last = summary.iterations[ITERATIONS - 1]!;
    expect(summary.statsIteration).toBe(ITERATIONS);
    expect(summary.stats).toEqual(last.stats);
    const rows = new Map(summaryRows(summary));
    expect(rows.get("programs")).toMatch(new RegExp(`^${last.stats.programs} in iteration ${ITERATIONS} \\(`));
    for (const k of ["calls", "tokens", "mean reward", "tokens/s"]) expect(rows.get(k)).toMatch(new RegExp(` in iteration ${ITERATIONS}$`));
  });
});
