// `arbor run` with a model that is not Arbor's policy: the engines serve the made-here Qwen-like
// model (byte-level BPE + ChatML with tools, src/model/made/) with its own tokenizer, template and
// stop tokens (under the configured served name, which the gateway sends), and every recorded call's
// ids are exactly what the engine used and produced.
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { BackendReply } from "../backends/backend.js";
import { parseRunConfig } from "../core/config.js";
import { LlamaTokenizer } from "../engine/llama-tokenizer.js";
import { makeModel } from "../model/made/made-models.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { runIteration, type RunSummary } from "./run.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-e2e-real-"));
chmodSync(dir, 0o755);
const replies: BackendReply[] = [];
let model: { path: string; imStart: number };
let summary: RunSummary;

beforeAll(async () => {
  const made = makeModel("bpe-chatml", join(dir, "models"), { seed: 5, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 2048 });
  model = { path: made.path, imStart: made.tokenizer.encode("<|im_start|>", { special: true })[0] as number };
  const cfg = parseRunConfig({
    name: "e2e-real",
    seed: 3,
    model: { path: model.path },
    engines: [{ name: "e0", sequences: 2, contextSize: 2048, servedModelName: "chatml-test" }],
    env: { name: "calc", tasks: 1, seed: 5 },
    rollout: { groupSize: 2, concurrency: 2 },
    // Native tool calls: the declared tools and earlier calls are rendered by the GGUF's Jinja template.
    agent: { toolMode: "native", maxTurns: 2, maxTokensPerCall: 16, maxTotalTokens: 32, temperature: 1 },
    sandbox: { root: join(dir, "sandboxes") },
    output: { dir: join(dir, "out") },
  });
  summary = await runIteration(cfg, { progress: false, onBackendReply: (_backend, reply) => replies.push(reply) });
}, 180_000);

describe("arbor run on a non-Arbor GGUF", () => {
  it("ends and rewards every program", () => {
    expect(summary.stats.programs).toBe(2);
    expect(summary.stats.unfinished).toBe(0);
    expect(summary.stats.rewarded).toBe(2);
    expect(summary.stats.calls).toBeGreaterThanOrEqual(2);
  });

  it("records the engine's ids: ChatML prompts rendered by the GGUF's template", async () => {
    const ok = replies.filter((r) => r.status === 200 && Array.isArray(r.json.choices));
    expect(ok.length).toBeGreaterThan(0);
    const store = new SqliteTrajectoryStore(summary.storePath);
    const tok = await LlamaTokenizer.load(model.path);
    try {
      const calls = (await store.listTrajectories(summary.runId)).flatMap((t) => t.calls);
      expect(calls).toHaveLength(ok.length);
      for (const c of calls) {
        expect(c.promptTokenIds[0]).toBe(model.imStart);
        const match = ok.find((r) => (r.json.prompt_token_ids as number[]).join() === c.promptTokenIds.join() && (r.json.choices[0].token_ids as number[]).join() === c.outputTokenIds.join());
        expect(match).toBeDefined();
        // The calc tool declared natively, in the template's <tools> block.
        expect(tok.decode(c.promptTokenIds, { special: true })).toMatch(/^<\|im_start\|>system\n[\s\S]*<tools>\n\{"type": "function", "function": \{"name": "calc"/);
      }
    } finally {
      await tok.dispose();
      await store.close();
    }
  });
});
