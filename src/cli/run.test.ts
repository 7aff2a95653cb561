// End to end on the real stack: tiny policy on llama.cpp engines, gateway, agents, bwrap sandboxes,
// SQLite store and batch export. Checks that nothing is lost and that every token id in the store
// and in the exported batch is exactly what an engine produced.
import { chmodSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { BackendReply } from "../backends/backend.js";
import { readSamplesJsonl } from "../batch/export-jsonl.js";
import type { ScoredSample } from "../batch/batch-sample.js";
import { parseRunConfig } from "../core/config.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { runIteration, summaryRows, type RunSummary } from "./run.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-e2e-"));
chmodSync(dir, 0o755);
const replies: { backend: string; reply: BackendReply }[] = [];
let summary: RunSummary;

beforeAll(async () => {
  process.env.ARBOR_E2E_ADMIN_TOKEN = "e2e-admin-token-0123456789";
  const cfg = parseRunConfig({
    name: "e2e",
    seed: 3,
    engines: [
      { name: "e0", sequences: 2, contextSize: 1024 },
      { name: "e1", sequences: 2, contextSize: 1024 },
    ],
    // Credentials on: every program must call with its own key (the rollout creates programs at the gateway).
    gateway: { auth: { adminTokenEnv: "ARBOR_E2E_ADMIN_TOKEN" }, limits: { maxInFlightPerProgram: 1 } },
    env: { name: "calc", tasks: 3, seed: 5 },
    rollout: { groupSize: 2, concurrency: 4 },
    agent: { maxTurns: 2, maxTokensPerCall: 24, maxTotalTokens: 48, temperature: 1 },
    sandbox: { root: join(dir, "sandboxes") },
    output: { dir: join(dir, "out") },
  });
  summary = await runIteration(cfg, { progress: false, onBackendReply: (backend, reply) => replies.push({ backend, reply }) });
}, 180_000);

function engineTokens(): { backend: string; prompt: number[]; output: number[]; logprobs: number[]; version: number }[] {
  return replies
    .filter((r) => r.reply.status === 200)
    .map(({ backend, reply }) => ({
      backend,
      prompt: reply.json.prompt_token_ids as number[],
      output: reply.json.choices[0].token_ids as number[],
      logprobs: (reply.json.choices[0].logprobs.content as { logprob: number }[]).map((c) => c.logprob),
      version: reply.json.policy_version as number,
    }));
}

describe("arbor run (end to end)", () => {
  it("ends every program with one recorded outcome and reward", async () => {
    expect(summary.stats.programs).toBe(6);
    expect(summary.stats.unfinished).toBe(0);
    expect(summary.stats.rewarded).toBe(6);
    expect(Object.values(summary.stats.terminations).reduce((a, b) => a + b, 0)).toBe(6);
    expect(summary.stats.calls).toBeGreaterThanOrEqual(6);
    // One iteration: its counts are the run's, said plainly.
    expect(summaryRows(summary).find(([k]) => k === "programs")?.[1]).toMatch(/^6 \(completed 6\)$/);
  });

  it("stores exactly the engines' token ids and logprobs, and survives reopening the store", async () => {
    const store = new SqliteTrajectoryStore(summary.storePath);
    try {
      const calls = (await store.listTrajectories(summary.runId)).flatMap((t) => t.calls);
      const engine = engineTokens();
      expect(calls).toHaveLength(engine.length);
      expect(new Set(engine.map((e) => e.backend))).toEqual(new Set(["e0", "e1"]));
      for (const c of calls) {
        const match = engine.filter((e) => e.output.join() === c.outputTokenIds.join() && e.prompt.join() === c.promptTokenIds.join());
        expect(match.length).toBeGreaterThanOrEqual(1);
        expect(c.logprobs).toEqual(match[0]!.logprobs);
        expect(c.policyVersion).toBe(match[0]!.version);
        expect(c.outputTokenIds.length).toBeGreaterThan(0);
      }
    } finally {
      await store.close();
    }
  });

  it("exports the batch the trainer gets, whose every call's prompt, output and logprobs are the engine's", async () => {
    const samples: ScoredSample[] = await readSamplesJsonl(summary.batchPath);
    expect(samples.length).toBeGreaterThanOrEqual(summary.stats.programs);
    const engine = engineTokens();
    const unmatched = [...engine];
    for (const s of samples) {
      // Merged samples: each chunk's model tokens are one call's output; what precedes them is that call's prompt.
      const chunks = [...new Set(s.chunks.filter((c) => c >= 0))];
      expect(chunks).toHaveLength(s.callIds.length);
      for (const c of chunks) {
        const at = s.chunks.flatMap((x, i) => (x === c ? [i] : []));
        const start = at[0]!;
        expect(at).toEqual(at.map((_, k) => start + k));
        const output = at.map((i) => s.tokenIds[i]);
        const i = unmatched.findIndex((e) => e.output.join() === output.join() && e.prompt.join() === s.tokenIds.slice(0, start).join());
        expect(i).toBeGreaterThanOrEqual(0);
        const e = unmatched.splice(i, 1)[0]!;
        expect(at.map((k) => s.lossMask[k])).toEqual(e.output.map(() => 1));
        expect(at.map((k) => s.oldLogprobs[k])).toEqual(e.logprobs);
        expect(at.map((k) => s.versions[k])).toEqual(e.output.map(() => e.version));
      }
      expect(s.advantages.every((x) => Number.isFinite(x))).toBe(true);
    }
    expect(unmatched).toEqual([]);
  });

  it("leaves no sandbox workspace behind", async () => {
    expect(readdirSync(join(dir, "sandboxes"))).toEqual([]);
  });
});
