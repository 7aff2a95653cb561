// `arbor run examples/bpe-chatml.yaml` end to end, unchanged but for its first iteration only, where it writes and
// a small completion-time reward term (below): the
// made-here BPE + ChatML model (models/calc-chatml-sft.gguf) calls its calc tool natively, the engine's
// template renders the declared tools, the Hermes parser reads the calls on the gateway's token path,
// every recorded call's ids are the engine's, the exported batch's ids are the recorded ones, and the
// checkpoint the engines load after the step keeps the model's tokenizer and template.
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { BackendReply } from "../backends/backend.js";
import { readSamplesJsonl } from "../batch/export-jsonl.js";
import { loadRunConfig, parseRunConfig } from "../core/config.js";
import type { Call } from "../core/types.js";
import { readGgufMetadata } from "../model/gguf.js";
import { tokenizerSpecFromGguf } from "../model/gguf-tokenizer.js";
import { tokenizerFromSpec } from "../model/made/tokenizer-from-spec.js";
import { SqliteTrajectoryStore } from "../store/sqlite-store.js";
import { runIteration, type RunSummary } from "./run.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-bpe-chatml-"));
chmodSync(dir, 0o755);
const replies: BackendReply[] = [];
let summary: RunSummary;
let calls: Call[];
let toolEvents: { tool: string }[];

beforeAll(async () => {
  const shipped = loadRunConfig(join(import.meta.dirname, "../../examples/bpe-chatml.yaml"));
  const cfg = parseRunConfig({
    ...shipped,
    iterations: 1,
    // The example's rewards can tie in every group of one iteration (sampling under load differs run to run),
    // and then no step is taken. Wall times never tie: a small completion-time term, open to every completed
    // program whatever its score, gives each group a spread, so the step this test checks always happens.
    reward: { ...shipped.reward, "completion-time": 0.01, options: { ...shipped.reward.options, "completion-time": { minOutcome: -1e9 } } },
    sandbox: { ...shipped.sandbox, root: join(dir, "sandboxes") },
    output: { dir: join(dir, "out") },
  });
  summary = await runIteration(cfg, { progress: false, runId: "bpe-chatml-test", onBackendReply: (_b, reply) => replies.push(reply) });
  const store = new SqliteTrajectoryStore(summary.storePath);
  try {
    const trajectories = await store.listTrajectories(summary.runId);
    calls = trajectories.flatMap((t) => t.calls);
    toolEvents = trajectories.flatMap((t) => t.tools ?? []);
  } finally {
    await store.close();
  }
}, 300_000);

describe("arbor run examples/bpe-chatml.yaml", () => {
  it("ends and rewards every program, and the model's tool calls reach the calc tool", () => {
    expect(summary.stats.programs).toBe(16);
    expect(summary.stats.unfinished).toBe(0);
    expect(summary.stats.rewarded).toBe(16);
    // Calls the Hermes parser read from the model's output: the agent only runs tools it got as tool_calls.
    expect(summary.toolCalls).toBeGreaterThan(0);
    expect(toolEvents.filter((e) => e.tool === "calc").length).toBe(summary.toolCalls);
  });

  it("records exactly the engine's prompt and output ids, in the model's own vocabulary", () => {
    const tok = tokenizerFromSpec(tokenizerSpecFromGguf(readGgufMetadata(join(import.meta.dirname, "../../models/calc-chatml-sft.gguf")).metadata));
    const ok = replies.filter((r) => r.status === 200 && Array.isArray(r.json.choices));
    expect(calls.length).toBe(ok.length);
    let withCall = 0;
    for (const c of calls) {
      const match = ok.find((r) => (r.json.prompt_token_ids as number[]).join() === c.promptTokenIds.join() && (r.json.choices[0].token_ids as number[]).join() === c.outputTokenIds.join());
      expect(match, `call ${c.id}`).toBeDefined();
      expect(tok.decode(c.promptTokenIds, { special: true })).toMatch(/^<\|im_start\|>system\n[\s\S]*<tools>\n/);
      if (tok.decode(c.outputTokenIds, { special: true }).includes("<tool_call>")) withCall++;
    }
    expect(withCall).toBeGreaterThan(0);
  });

  it("exports the recorded ids: every sample is its calls' prompts and outputs, merged", async () => {
    const samples = await readSamplesJsonl(summary.batchPath);
    expect(samples.length).toBeGreaterThan(0);
    const byId = new Map(calls.map((c) => [c.id, c]));
    for (const s of samples) {
      const own = s.callIds.map((id) => byId.get(id)!);
      for (const c of own) {
        const through = [...c.promptTokenIds, ...c.outputTokenIds];
        expect(s.tokenIds.slice(0, through.length)).toEqual(through);
        // The output's old logprobs are the engine's, where the call's output sits in the sample.
        expect(s.oldLogprobs.slice(c.promptTokenIds.length, through.length)).toEqual(c.logprobs);
      }
      const last = own.at(-1)!;
      expect(s.tokenIds).toEqual([...last.promptTokenIds, ...last.outputTokenIds]);
    }
  });

  it("publishes a checkpoint with the model's tokenizer and template, which the engine loads", () => {
    expect(summary.policyVersion).toBe(1);
    expect(summary.engineVersions).toEqual([1]);
    const ckpt = summary.iterations[0]!.update!.checkpoint!;
    const shipped = tokenizerSpecFromGguf(readGgufMetadata(join(import.meta.dirname, "../../models/calc-chatml-sft.gguf")).metadata);
    expect(tokenizerSpecFromGguf(readGgufMetadata(ckpt).metadata)).toEqual(shipped);
  });
});
