// Prefill/decode disaggregation with two engine servers in this process (the child-process version is
// cli/serve-disagg.test.ts): a prefill engine and a decode engine on models/calc-sft.gguf hand each
// prompt's KV over through the Redis KV pool, and the answers equal a mixed engine's token for token,
// logprob for logprob; the decode engine really loads the state (it evaluates one token where a
// recompute would evaluate the whole prompt); the roles refuse what they do not serve.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_TEST_URL, redisUnreachable } from "../../testing/redis-test.js";
import { LlamaCppStepRunner } from "../core/llamacpp-step-runner.js";
import { ScheduledExecutor } from "../core/scheduled-executor.js";
import { RedisStatePool } from "../kv/redis-state-pool.js";
import { createEngineServer, type EngineServer } from "../server.js";

const unreachable = await redisUnreachable();
if (unreachable) console.warn(`skipping the prefill/decode handoff tests: ${unreachable}`);

const MODEL = "models/calc-sft.gguf";
const SYSTEM = "You are a calculator. Use the calc tool, then answer with 'Answer: <n>'.";
const QUESTIONS = ["What is 2+3?", "Compute 17*4-9.", "What is (8+5)*3?", "How much is 120/6+7?", "9-4", "Add 11 and 31.", "What is 6*7*2?", "1000/8"];

const poolName = `test-${randomBytes(6).toString("hex")}`;
const pools: RedisStatePool[] = [];
const newPool = (): RedisStatePool => {
  const p = new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 64 * 1024 * 1024, name: poolName });
  pools.push(p);
  return p;
};
let mixed: EngineServer;
let prefill: EngineServer;
let decode: EngineServer;
const common = { modelPath: MODEL, policyVersion: 0, sequences: 2, contextSize: 512, maxWaiting: 4, executorKind: "llamacpp-scheduled" } as const;

interface Answer {
  choices: { token_ids: number[]; finish_reason: string; text?: string; logprobs: { content: { token: string; logprob: number; top_logprobs: { logprob: number }[] }[] } }[];
  usage: { prompt_tokens: number; completion_tokens: number };
  prompt_token_ids: number[];
  kv_transfer_params?: Record<string, unknown>;
}

async function post(server: EngineServer, url: string, payload: Record<string, unknown>): Promise<{ status: number; json: Answer & { error?: { message: string; param: string } } }> {
  const res = await server.app.inject({ method: "POST", url, payload });
  return { status: res.statusCode, json: res.json() };
}

const chatBody = (question: string, seed: number, extra: Record<string, unknown> = {}) => ({
  messages: [
    { role: "system", content: SYSTEM },
    { role: "user", content: question },
  ],
  max_tokens: 24,
  temperature: 1,
  seed,
  logprobs: true,
  top_logprobs: 3,
  return_token_ids: true,
  ...extra,
});

/** Prefill on one engine, then decode on the other with the prefill's kv_transfer_params. */
async function disaggregated(body: Record<string, unknown>): Promise<{ prefilled: Answer; answer: Answer }> {
  const p = await post(prefill, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_decode: true } });
  expect(p.status, JSON.stringify(p.json)).toBe(200);
  const kv = p.json.kv_transfer_params as { done: boolean; kv_key: string; first_token: unknown };
  if (kv.done) return { prefilled: p.json, answer: p.json };
  const d = await post(decode, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_prefill: true, kv_key: kv.kv_key, first_token: kv.first_token } });
  expect(d.status, JSON.stringify(d.json)).toBe(200);
  return { prefilled: p.json, answer: d.json };
}

type Content = Answer["choices"][number]["logprobs"]["content"];

/** The same tokens and alternatives with logprobs within 1e-5 (prefix reuse changes llama.cpp's batch shapes). */
function expectCloseLogprobs(got: Content, want: Content): void {
  const tokens = (c: Content) => c.map((x) => [x.token, x.top_logprobs.map((t) => (t as { token?: string }).token)]);
  expect(tokens(got)).toEqual(tokens(want));
  got.forEach((c, i) => {
    expect(Math.abs(c.logprob - want[i]!.logprob)).toBeLessThan(1e-5);
    c.top_logprobs.forEach((t, k) => expect(Math.abs(t.logprob - want[i]!.top_logprobs[k]!.logprob)).toBeLessThan(1e-5));
  });
}

/** Tokens the decode engine's llama.cpp runner has evaluated so far. */
function evaluated(server: EngineServer): number {
  return ((server.executor as ScheduledExecutor).runner as LlamaCppStepRunner).stats().evaluatedTokens;
}

beforeAll(async () => {
  if (unreachable) return;
  mixed = await createEngineServer({ ...common, name: "mixed", seed: 11 });
  prefill = await createEngineServer({ ...common, name: "prefill", seed: 12, role: "prefill", kvPool: newPool() });
  decode = await createEngineServer({ ...common, name: "decode", seed: 13, role: "decode", kvPool: newPool() });
}, 60_000);

afterAll(async () => {
  for (const s of [mixed, prefill, decode]) await s?.close();
  const admin = new RedisStatePool({ url: REDIS_TEST_URL, capacityBytes: 1, name: poolName });
  if (!unreachable) await admin.clear();
  await admin.close();
});

describe.skipIf(unreachable !== undefined)("prefill/decode engines through the Redis KV pool", () => {
  it("answer with the same token ids and logprobs as a mixed engine, loading the prompt's KV", async () => {
    let handedOver = 0;
    for (const [i, question] of QUESTIONS.entries()) {
      const body = chatBody(question, 1 + i);
      // A fresh mixed engine computes the prompt as the prefill engine does (no earlier prefix to reuse).
      const fresh = await createEngineServer({ ...common, name: "fresh", seed: 11 });
      let want: Awaited<ReturnType<typeof post>>;
      try {
        want = await post(fresh, "/v1/chat/completions", body);
      } finally {
        await fresh.close();
      }
      expect(want.status).toBe(200);
      const before = evaluated(decode);
      const { prefilled, answer } = await disaggregated(body);
      const got = answer.choices[0]!;
      const ref = want.json.choices[0]!;
      expect(got.token_ids).toEqual(ref.token_ids);
      // Bit for bit: the decode engine runs on the prefill's very KV, with the batch shapes of a mixed engine.
      expect(got.logprobs.content).toEqual(ref.logprobs.content);
      expect(got.finish_reason).toBe(ref.finish_reason);
      expect(answer.usage).toEqual(want.json.usage);
      expect(answer.prompt_token_ids).toEqual(want.json.prompt_token_ids);
      // The long-lived mixed engine reuses earlier prompts' prefixes: the same tokens, logprobs to 1e-5.
      const reused = (await post(mixed, "/v1/chat/completions", body)).json.choices[0]!;
      expect(reused.token_ids).toEqual(ref.token_ids);
      expectCloseLogprobs(reused.logprobs.content, ref.logprobs.content);
      const kv = prefilled.kv_transfer_params as { done: boolean; kv_tokens: number; kv_bytes: number };
      if (kv.done) continue;
      handedOver++;
      expect(kv.kv_tokens).toBe(want.json.prompt_token_ids.length);
      expect(kv.kv_bytes).toBeGreaterThan(0);
      expect(answer.kv_transfer_params).toMatchObject({ kv_loaded: true, kv_tokens: want.json.prompt_token_ids.length });
      // Loaded, not recomputed: the decode engine evaluated the first token and each one it fed back
      // (all but the last), where a recompute evaluates the whole prompt too.
      expect(evaluated(decode) - before).toBe(got.token_ids.length - 1);
    }
    expect(handedOver).toBeGreaterThanOrEqual(QUESTIONS.length - 1);
    // Each handoff's state left the pool with its decode.
    expect((await pools[0]!.stats()).entries).toBe(0);
  }, 60_000);

  it("concurrent handoffs keep each request's tokens (several prefills and decodes batched together)", async () => {
    // Questions no engine has seen: no sequence holds a longer prefix, so every decode loads its state.
    const bodies = ["What is 3*3?", "Compute 50-8.", "What is 2*(4+4)?", "Add 5 and 6."].map((q, i) => chatBody(q, 40 + i));
    const want = await Promise.all(bodies.map((b) => post(mixed, "/v1/chat/completions", b)));
    const got = await Promise.all(bodies.map((b) => disaggregated(b)));
    got.forEach(({ answer }, i) => {
      const ref = want[i]!.json.choices[0]!;
      expect(answer.choices[0]!.token_ids).toEqual(ref.token_ids);
      // Batched with others, llama.cpp's sums may move in the last digits: logprobs to 1e-5.
      expectCloseLogprobs(answer.choices[0]!.logprobs.content, ref.logprobs.content);
      if (answer.kv_transfer_params) expect(answer.kv_transfer_params, JSON.stringify(answer.kv_transfer_params)).toMatchObject({ kv_loaded: true });
      else expect(got[i]!.prefilled.kv_transfer_params).toEqual({ done: true });
    });
    expect((await pools[0]!.stats()).entries).toBe(0);
  }, 60_000);

  it("hands a text completion over too, and a streamed decode streams the first token first", async () => {
    const body = { prompt: "<s><|system|>You are a calculator.<|end|><|user|>What is 9*9?<|end|><|assistant|>", max_tokens: 12, temperature: 1, seed: 5, logprobs: 2, return_token_ids: true };
    const want = await post(mixed, "/v1/completions", body);
    const p = await post(prefill, "/v1/completions", { ...body, kv_transfer_params: { do_remote_decode: true } });
    const kv = p.json.kv_transfer_params as { kv_key: string; first_token: unknown; done: boolean };
    expect(kv.done).toBe(false);
    const res = await decode.app.inject({
      method: "POST",
      url: "/v1/completions",
      payload: { ...body, stream: true, kv_transfer_params: { do_remote_prefill: true, kv_key: kv.kv_key, first_token: kv.first_token } },
    });
    expect(res.statusCode).toBe(200);
    const chunks = res.body
      .split("\n\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as { choices: { text: string; token_ids?: number[] }[] });
    const text = chunks.map((c) => c.choices[0]?.text ?? "").join("");
    expect(text).toBe(want.json.choices[0]!.text);
    expect(chunks.flatMap((c) => c.choices[0]?.token_ids ?? [])).toEqual(want.json.choices[0]!.token_ids);
  });

  it("a state missing from the pool is recomputed: same answer, kv_loaded false with the reason", async () => {
    const body = chatBody(QUESTIONS[1]!, 9);
    const want = await post(mixed, "/v1/chat/completions", body);
    const p = await post(prefill, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_decode: true } });
    const kv = p.json.kv_transfer_params as { kv_key: string; first_token: unknown };
    expect(await pools[0]!.delete(kv.kv_key)).toBe(true);
    const d = await post(decode, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_prefill: true, kv_key: kv.kv_key, first_token: kv.first_token } });
    expect(d.status).toBe(200);
    expect(d.json.choices[0]!.token_ids).toEqual(want.json.choices[0]!.token_ids);
    expect(d.json.kv_transfer_params).toMatchObject({ kv_loaded: false, kv_miss_reason: expect.stringMatching(/no state under kv-.* in the KV pool/) });
  });

  it("a first token that ends the request is the whole answer, streamed too", async () => {
    const stopId = decode.served.stopIds[0]!;
    const body = { prompt: "What is 1+1?", max_tokens: 8, seed: 1, logprobs: 0, return_token_ids: true };
    const params = { do_remote_prefill: true, kv_key: "kv-none", first_token: { id: stopId, logprob: -0.25 } };
    const whole = await post(decode, "/v1/completions", { ...body, kv_transfer_params: params });
    expect(whole.status).toBe(200);
    expect(whole.json.choices[0]).toMatchObject({ token_ids: [stopId], finish_reason: "stop" });
    expect(whole.json.kv_transfer_params).toMatchObject({ kv_loaded: false, kv_miss_reason: expect.stringMatching(/no state under kv-none/) });
    const res = await decode.app.inject({ method: "POST", url: "/v1/completions", payload: { ...body, stream: true, kv_transfer_params: params } });
    const chunks = res.body
      .split("\n\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as { choices: { token_ids?: number[]; finish_reason?: string | null }[] });
    expect(chunks.flatMap((c) => c.choices[0]?.token_ids ?? [])).toEqual([stopId]);
    expect(chunks.map((c) => c.choices[0]?.finish_reason).filter((f) => f != null)).toEqual(["stop"]);
  });

  it("each role refuses what it does not serve, naming kv_transfer_params", async () => {
    const body = chatBody(QUESTIONS[0]!, 1);
    const plainOnPrefill = await post(prefill, "/v1/chat/completions", body);
    expect(plainOnPrefill.status).toBe(400);
    expect(plainOnPrefill.json.error?.message).toMatch(/kv_transfer_params: engine prefill serves the prefill role/);
    const plainOnDecode = await post(decode, "/v1/chat/completions", body);
    expect(plainOnDecode.json.error?.message).toMatch(/kv_transfer_params: engine decode serves the decode role/);
    const prefillOnDecode = await post(decode, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_decode: true } });
    expect(prefillOnDecode.json.error?.param).toBe("kv_transfer_params.do_remote_decode");
    const noKey = await post(decode, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_prefill: true } });
    expect(noKey.json.error?.param).toBe("kv_transfer_params.kv_key");
    const streamed = await post(prefill, "/v1/chat/completions", { ...body, stream: true, kv_transfer_params: { do_remote_decode: true } });
    expect(streamed.status).toBe(400);
    expect(streamed.json.error?.param).toBe("stream");
    const noPool = await post(mixed, "/v1/chat/completions", { ...body, kv_transfer_params: { do_remote_decode: true } });
    expect(noPool.json.error?.message).toMatch(/engine mixed has no kvPool configured/);
  });

  it("refuses a prefill or decode role without a pool or without an executor that holds KV", async () => {
    await expect(createEngineServer({ ...common, name: "p", role: "prefill" })).rejects.toThrow(/engine p: role "prefill" needs kvPool/);
    await expect(createEngineServer({ ...common, name: "d", executorKind: "llamacpp", role: "decode", kvPool: newPool() })).rejects.toThrow(
      /engine d: role "decode" with a kvPool needs an executor that holds real KV \("llamacpp-scheduled"\), got "llamacpp"/,
    );
  });
});
