// The disaggregated backend over real engines (in this process, listening on ports) on
// models/calc-sft.gguf with the Redis KV pool: a token-level call split prefill→decode answers the
// mixed engine's tokens; with a mixed engine in the set, the cost-aware placement keeps a call whole
// while the mixed engine is idle and splits the next one while it is busy.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStatePool } from "../engine/kv/redis-state-pool.js";
import { startEngineServer, type ListeningEngineServer } from "../engine/server.js";
import { REDIS_TEST_URL, redisUnreachable } from "../testing/redis-test.js";
import type { GenerateRequest, TokenBackend } from "./backend.js";
import { createDisaggBackend } from "./disagg-backend.js";
import { createArborBackend } from "./vllm.js";

const unreachable = await redisUnreachable();
if (unreachable) console.warn(`skipping the disaggregated backend tests: ${unreachable}`);

const poolName = `test-${randomBytes(6).toString("hex")}`;
const common = { modelPath: "models/calc-sft.gguf", policyVersion: 0, sequences: 2, contextSize: 512, maxWaiting: 8, executorKind: "llamacpp-scheduled" } as const;
const engines: ListeningEngineServer[] = [];
let prefill: TokenBackend;
let decode: TokenBackend;
let mixed: TokenBackend;
let prompts: number[][];

const pool = () => new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 64 * 1024 * 1024, name: poolName });
async function engine(name: string, extra: object): Promise<TokenBackend> {
  const e = await startEngineServer({ ...common, name, ...extra });
  engines.push(e);
  return createArborBackend({ name, url: `${e.url}/v1` });
}
const request = (prompt: number[], seed: number): GenerateRequest => ({ promptTokenIds: prompt, maxTokens: 16, temperature: 1, seed });

beforeAll(async () => {
  if (unreachable) return;
  prefill = await engine("p0", { role: "prefill", kvPool: pool() });
  decode = await engine("d0", { role: "decode", kvPool: pool() });
  mixed = await engine("m0", {});
  const questions = ["What is 2+3?", "Compute 17*4-9.", "What is (8+5)*3?", "Add 11 and 31."];
  prompts = await Promise.all(
    questions.map(async (q) => (await mixed.tokenize!({ messages: [{ role: "system", content: "You are a calculator." }, { role: "user", content: q }], addGenerationPrompt: true })).tokens),
  );
}, 60_000);

afterAll(async () => {
  for (const e of engines) await e.close();
  const admin = pool();
  if (!unreachable) await admin.clear();
  await admin.close();
});

describe.skipIf(unreachable !== undefined)("createDisaggBackend", () => {
  it("splits each token-level call prefill→decode and answers the mixed engine's tokens", async () => {
    const split = createDisaggBackend({ name: "pd", prefill: [prefill], decode: [decode] });
    for (const [i, prompt] of prompts.entries()) {
      const want = await mixed.generate(request(prompt, 3 + i));
      const got = await split.generate(request(prompt, 3 + i));
      expect(got.outputTokenIds).toEqual(want.outputTokenIds);
      expect(got.finishReason).toBe(want.finishReason);
      got.logprobs.forEach((lp, k) => expect(Math.abs(lp - want.logprobs[k]!)).toBeLessThan(1e-5));
      expect(got.promptTokenIds).toEqual(prompt);
      // The answer is a plain engine's: the handoff's fields stay inside the backend.
      expect(got.kvTransferParams).toBeUndefined();
    }
    const stats = split.stats();
    expect(stats.split).toBe(prompts.length);
    // Every decode loaded its prompt's KV from the pool (none was recomputed).
    expect(stats.kvLoaded + stats.endedAtPrefill).toBe(prompts.length);
    expect(stats.kvRecomputed).toBe(0);
    // Learnt from the prefill answers: the tiny model's f32 KV of 2 layers × 64 wide is 1 KiB a token, plus the state's header.
    expect(stats.kvBytesPerToken).toBeGreaterThan(1024);
    expect(stats.kvBytesPerToken).toBeLessThan(4096);
  });

  it("weighs queueing against moving KV: whole on the idle mixed engine, split while it is busy", async () => {
    const pd = createDisaggBackend({ name: "pdm", prefill: [prefill], decode: [decode], mixed: [mixed], cost: { queueMsPerRequest: 50, transferBytesPerMs: 1e6, transferLatencyMs: 2 } });
    const reqs = prompts.slice(0, 3).map((p, i) => request(p, 20 + i));
    const placed: string[] = [];
    const answers = await Promise.all(
      reqs.map((r) => {
        const out = pd.generate(r);
        placed.push(pd.lastPlacement()!.kind);
        return out;
      }),
    );
    // Call 1: the mixed engine is idle. Call 2: it has one in flight (50 ms) against ~2 ms of transfer.
    // Call 3: the mixed engine's 50 ms against the prefill engine's 50 ms plus the transfer.
    expect(placed).toEqual(["mixed", "split", "mixed"]);
    for (const [i, r] of reqs.entries()) expect(answers[i]!.outputTokenIds).toEqual((await mixed.generate(r)).outputTokenIds);
  });

  it("splits a streamed call and an OpenAI-route call too", async () => {
    const split = createDisaggBackend({ name: "pd", prefill: [prefill], decode: [decode] });
    const want = await mixed.generate(request(prompts[1]!, 9));
    const stream = await split.generateStream!(request(prompts[1]!, 9));
    const ids: number[] = [];
    for await (const d of stream.deltas) ids.push(...d.ids);
    expect(ids).toEqual(want.outputTokenIds);
    expect(stream.result().outputTokenIds).toEqual(want.outputTokenIds);

    const body = { model: "arbor-tiny", prompt: prompts[2]!, max_tokens: 10, seed: 4, temperature: 1, return_token_ids: true };
    const reply = await split.completions(body);
    const ref = await mixed.completions(body);
    expect(reply.status).toBe(200);
    expect(reply.json.choices[0].token_ids).toEqual(ref.json.choices[0].token_ids);
  });

  it("refuses a set of engines that cannot place a call", () => {
    expect(() => createDisaggBackend({ name: "x", prefill: [prefill], decode: [] })).toThrow(/backend 'x': prefill and decode engines come in pairs/);
    expect(() => createDisaggBackend({ name: "y", prefill: [], decode: [] })).toThrow(/backend 'y': needs prefill and decode engines/);
  });
});
