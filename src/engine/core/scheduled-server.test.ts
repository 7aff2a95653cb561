import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePolicy } from "../../model/policy.js";
import { createEngineServer, type EngineServer } from "../server.js";
import { ScheduledExecutor } from "./scheduled-executor.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const MESSAGES = [
  { role: "system", content: "You are a calculator." },
  { role: "user", content: "What is 2+3?" },
];

let dir: string;
const servers: EngineServer[] = [];

function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text);
  if (!m) throw new Error(`metric ${name} missing`);
  return Number(m[1]);
}

async function chat(server: EngineServer, seed: number) {
  const res = await server.app.inject({
    method: "POST",
    url: "/v1/chat/completions",
    payload: { messages: MESSAGES, max_tokens: 6, seed, logprobs: true, return_token_ids: true },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { choices: { token_ids: number[]; finish_reason: string; logprobs: { content: { logprob: number }[] } }[] };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-sched-server-"));
});

afterAll(async () => {
  for (const s of servers) await s.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("engine server with a scheduled executor", () => {
  it("llamacpp-scheduled answers like the v0 executor and reports real prefix-cache metrics", async () => {
    const modelPath = ensurePolicy(dir, INIT).path;
    const common = { name: "t", modelPath, policyVersion: 1, sequences: 2, contextSize: 256, maxWaiting: 4, seed: 3 };
    const sched = await createEngineServer({ ...common, executorKind: "llamacpp-scheduled" });
    servers.push(sched);
    const v0 = await createEngineServer({ ...common, executorKind: "llamacpp" });
    servers.push(v0);
    expect(sched.executor).toBeInstanceOf(ScheduledExecutor);

    const a = await chat(sched, 42);
    const b = await chat(sched, 42);
    const ref = await chat(v0, 42);
    expect(a.choices[0]!.token_ids).toEqual(ref.choices[0]!.token_ids);
    expect(b.choices[0]!.token_ids).toEqual(ref.choices[0]!.token_ids);
    a.choices[0]!.logprobs.content.forEach((lp, i) => expect(lp.logprob).toBeCloseTo(ref.choices[0]!.logprobs.content[i]!.logprob, 6));

    const text = (await sched.app.inject({ method: "GET", url: "/metrics" })).body;
    const queries = metric(text, "vllm:prefix_cache_queries_total");
    const hits = metric(text, "vllm:prefix_cache_hits_total");
    expect(queries).toBeGreaterThan(0);
    // The second identical prompt hits every full block but the last token's.
    expect(hits).toBeGreaterThan(0);
    expect(hits).toBeLessThan(queries);
    expect(metric(text, "vllm:num_preemptions_total")).toBe(0);
    expect(metric(text, "vllm:kv_cache_usage_perc")).toBe(0);
    expect(text).toMatch(/^vllm:cache_config_info\{block_size="16",num_gpu_blocks="32"/m);
  });

  it("speculative decoding over HTTP: the same answer and logprobs, and vLLM's spec_decode counters", async () => {
    const modelPath = ensurePolicy(dir, INIT).path;
    const common = { name: "s", modelPath, policyVersion: 1, sequences: 2, contextSize: 256, maxWaiting: 4, seed: 3, executorKind: "llamacpp-scheduled" as const };
    // Every draft verified (adaptive: false): the adaptive budget fits measured step times, and on a loaded
    // machine it may verify none, which would leave the counters checked below at 0.
    const spec = await createEngineServer({ ...common, speculative: { method: "suffix", maxSpecTokens: 4, adaptive: false } });
    servers.push(spec);
    const plain = await createEngineServer(common);
    servers.push(plain);
    const ref = await chat(plain, 42);
    // The second identical request is drafted from the first one's response (the global tree).
    for (const got of [await chat(spec, 42), await chat(spec, 42)]) {
      expect(got.choices[0]!.token_ids).toEqual(ref.choices[0]!.token_ids);
      got.choices[0]!.logprobs.content.forEach((lp, i) => expect(Math.abs(lp.logprob - ref.choices[0]!.logprobs.content[i]!.logprob)).toBeLessThan(1e-5));
    }
    // A draft group (GRPO siblings) is a request field; it changes what is drafted, never the answer.
    const grouped = await spec.app.inject({ method: "POST", url: "/v1/chat/completions", payload: { messages: MESSAGES, max_tokens: 6, seed: 42, logprobs: true, return_token_ids: true, draft_group_id: "g1" } });
    expect(grouped.statusCode, grouped.body).toBe(200);
    expect(grouped.json().choices[0].token_ids).toEqual(ref.choices[0]!.token_ids);
    const bad = await spec.app.inject({ method: "POST", url: "/v1/completions", payload: { prompt: "hi", max_tokens: 2, draft_group_id: "" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(/draft_group_id/);
    const text = (await spec.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(metric(text, "vllm:spec_decode_num_drafts_total")).toBeGreaterThan(0);
    expect(metric(text, "vllm:spec_decode_num_accepted_tokens_total")).toBeGreaterThan(0);
    expect(metric(text, "vllm:spec_decode_num_draft_tokens_total")).toBeGreaterThanOrEqual(metric(text, "vllm:spec_decode_num_accepted_tokens_total"));
    // Engines that do not speculate do not export the counters.
    expect((await plain.app.inject({ method: "GET", url: "/metrics" })).body).not.toMatch(/spec_decode/);
    await expect(createEngineServer({ ...common, executorKind: "llamacpp", speculative: { method: "suffix" } })).rejects.toThrow(/speculative decoding runs on executorKind "llamacpp-scheduled", not "llamacpp"/);
  });

  it("costmodel serves random tokens to max_tokens with the profile's timing", async () => {
    const server = await createEngineServer({
      name: "cm",
      modelPath: "(none)",
      policyVersion: 1,
      sequences: 4,
      contextSize: 512,
      maxWaiting: 4,
      executorKind: "costmodel",
      costProfile: "llama-3-8b/h100",
    });
    servers.push(server);
    const r = await chat(server, 1);
    expect(r.choices[0]!.finish_reason).toBe("length");
    expect(r.choices[0]!.token_ids).toHaveLength(6);
    const text = (await server.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(metric(text, "vllm:prefix_cache_queries_total")).toBeGreaterThan(0);
  });

  it("refuses costmodel without a profile", async () => {
    await expect(
      createEngineServer({ name: "cm", modelPath: "x", policyVersion: 1, sequences: 1, contextSize: 64, maxWaiting: 1, executorKind: "costmodel" }),
    ).rejects.toThrow(/needs costProfile/);
  });
});
