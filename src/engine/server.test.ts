import { mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import { renderChat } from "../model/chat-template.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import type { Executor, GenerateRequest, GenerateResult } from "./executor.js";
import { llamaRuntime } from "./llama-runtime.js";
import type { StreamEvent, StreamEventChoice } from "./http/stream-chunks.js";
import { createEngineServer, startEngineServer, type EngineServer, type ListeningEngineServer } from "./server.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const MESSAGES = [
  { role: "system", content: "You are a calculator." },
  { role: "user", content: "What is 2+3?" },
] as const;

let dir: string;
let modelPath: string;
let server: ListeningEngineServer;

interface ChatBody {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: string; content: string };
    finish_reason: string;
    logprobs: { content: { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number }[] }[] } | null;
    token_ids?: number[];
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  prompt_token_ids?: number[];
  policy_version: number;
}

async function post(path: string, payload: unknown, target: EngineServer = server) {
  const res = await target.app.inject({ method: "POST", url: path, payload: payload as object });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

async function chat(payload: Record<string, unknown>): Promise<ChatBody> {
  const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 24, return_token_ids: true, logprobs: true, ...payload });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as ChatBody;
}

function contentIds(c: ChatBody["choices"][number]): number[] {
  const ids = c.token_ids ?? [];
  return c.finish_reason === "stop" ? ids.slice(0, -1) : ids;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-engine-"));
  modelPath = ensurePolicy(dir, INIT).path;
  server = await startEngineServer({ name: "test", modelPath, policyVersion: 3, sequences: 2, contextSize: 256, maxWaiting: 4, seed: 11 });
});

afterAll(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("chat completions", () => {
  it("answers in vLLM's shape with token ids that decode to the content", async () => {
    const body = await chat({ temperature: 1, seed: 5, top_logprobs: 3 });
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(body.object).toBe("chat.completion");
    expect(Number.isInteger(body.created)).toBe(true);
    expect(body.model).toBe("arbor-tiny");
    expect(body.policy_version).toBe(3);
    const c = body.choices[0]!;
    expect(c.message.role).toBe("assistant");
    expect(["stop", "length"]).toContain(c.finish_reason);
    expect(vocab.decode(contentIds(c))).toBe(c.message.content);
    expect(body.prompt_token_ids).toEqual(renderChat([...MESSAGES], (t) => vocab.encode(t), vocab));
    expect(body.usage).toEqual({
      prompt_tokens: body.prompt_token_ids!.length,
      completion_tokens: c.token_ids!.length,
      total_tokens: body.prompt_token_ids!.length + c.token_ids!.length,
    });
    const lps = c.logprobs!.content;
    expect(lps).toHaveLength(c.token_ids!.length);
    lps.forEach((lp, i) => {
      expect(Number.isFinite(lp.logprob)).toBe(true);
      expect(lp.logprob).toBeLessThanOrEqual(0);
      expect(lp.token).toBe(vocab.tokenText(c.token_ids![i]!));
      expect(lp.top_logprobs).toHaveLength(3);
      expect(lp.top_logprobs[0]!.logprob).toBeGreaterThanOrEqual(lp.logprob - 1e-12);
    });
  });

  it("omits token ids and logprobs unless asked", async () => {
    const res = await post("/v1/chat/completions", { messages: MESSAGES, max_tokens: 4, seed: 1 });
    expect(res.status).toBe(200);
    expect(res.body.prompt_token_ids).toBeUndefined();
    expect(res.body.choices[0].token_ids).toBeUndefined();
    expect(res.body.choices[0].logprobs).toBeNull();
    expect(res.headers["x-arbor-policy-version"]).toBe("3");
  });

  it("is reproducible per seed", async () => {
    const a = await chat({ seed: 1234 });
    const b = await chat({ seed: 1234 });
    const c = await chat({ seed: 1235 });
    expect(b.choices[0]!.token_ids).toEqual(a.choices[0]!.token_ids);
    expect(b.choices[0]!.logprobs).toEqual(a.choices[0]!.logprobs);
    expect(c.choices[0]!.token_ids).not.toEqual(a.choices[0]!.token_ids);
  });

  it("matches an independent llama.cpp evaluation: argmax at T=0, log softmax(log p/T) at T>0", async () => {
    const greedy = await chat({ temperature: 0 });
    const sampled = await chat({ temperature: 0.7, seed: 99 });
    const llama = await llamaRuntime();
    const model: LlamaModel = await llama.loadModel({ modelPath });
    const ctx: LlamaContext = await model.createContext({
      contextSize: 256,
      sequences: 1,
      threads: 1,
      flashAttention: false,
      experimentalKvCacheKeyType: "F32",
      experimentalKvCacheValueType: "F32",
    });
    try {
      for (const [body, T] of [[greedy, 0], [sampled, 0.7]] as const) {
        const seq = ctx.getSequence();
        const ids = body.choices[0]!.token_ids!;
        const lps = body.choices[0]!.logprobs!.content;
        const gen = seq.evaluateWithMetadata(body.prompt_token_ids! as Token[], { probabilities: true }, { temperature: 0, yieldEogToken: true });
        let step = await gen.next();
        for (let i = 0; i < ids.length; i++) {
          const probs = step.value!.probabilities;
          let best = -1;
          let bestP = -1;
          for (const [id, p] of probs) if (p > bestP || (p === bestP && id < best)) [best, bestP] = [id, p];
          const p = probs.get(ids[i] as Token)!;
          if (T === 0) {
            expect(ids[i]).toBe(best);
            expect(lps[i]!.logprob).toBeCloseTo(Math.log(p), 4);
          } else {
            let z = 0;
            for (const q of probs.values()) z += q ** (1 / T);
            expect(lps[i]!.logprob).toBeCloseTo(Math.log(p ** (1 / T) / z), 4);
          }
          if (i + 1 < ids.length) step = await gen.next(ids[i] as Token);
        }
        await gen.return();
        await seq.dispose();
      }
    } finally {
      await ctx.dispose();
      await model.dispose();
    }
  });
});

describe("text completions", () => {
  it("takes a token-id prompt as-is and reports legacy logprobs", async () => {
    const prompt = [vocab.bosId, ...vocab.encode("12+30=")];
    const res = await post("/v1/completions", { prompt, max_tokens: 12, temperature: 0.8, seed: 3, logprobs: 2, return_token_ids: true });
    expect(res.status).toBe(200);
    const body = res.body;
    expect(body.object).toBe("text_completion");
    expect(body.id).toMatch(/^cmpl-/);
    expect(body.policy_version).toBe(3);
    const c = body.choices[0];
    expect(c.prompt_token_ids).toEqual(prompt);
    expect(body.prompt_token_ids).toBeUndefined();
    const ids: number[] = c.token_ids;
    expect(ids.length).toBeGreaterThan(0);
    expect(vocab.decode(c.finish_reason === "stop" ? ids.slice(0, -1) : ids)).toBe(c.text);
    const lp = c.logprobs;
    expect(lp.tokens).toEqual(ids.map((id) => vocab.tokenText(id)));
    expect(lp.token_logprobs).toHaveLength(ids.length);
    for (const x of lp.token_logprobs) expect(x).toBeLessThanOrEqual(0);
    expect(lp.text_offset[0]).toBe(0);
    for (const top of lp.top_logprobs) expect(Object.keys(top).length).toBeGreaterThanOrEqual(2);
    expect(body.usage.prompt_tokens).toBe(prompt.length);
  });

  it("tokenizes a string prompt after <s> and defaults max_tokens to 16", async () => {
    const res = await post("/v1/completions", { prompt: "hello world", temperature: 0, return_token_ids: true });
    expect(res.status).toBe(200);
    const c = res.body.choices[0];
    expect(c.prompt_token_ids).toEqual([vocab.bosId, ...vocab.encode("hello world")]);
    expect(c.token_ids.length).toBeLessThanOrEqual(16);
    if (c.finish_reason === "length") expect(c.token_ids).toHaveLength(16);
    expect(c.logprobs).toBeNull();
  });
});

describe("validation", () => {
  const cases: [string, string, Record<string, unknown>, number, string | null, RegExp][] = [
    ["bad role", "/v1/chat/completions", { messages: [{ role: "robot", content: "x" }] }, 400, "messages[0].role", /robot|Invalid option/],
    ["no messages", "/v1/chat/completions", { messages: [] }, 400, "messages", /at least one/],
    ["temperature type", "/v1/chat/completions", { messages: MESSAGES, temperature: "hot" }, 400, "temperature", /number/],
    ["top_logprobs > 20", "/v1/chat/completions", { messages: MESSAGES, logprobs: true, top_logprobs: 21 }, 400, "top_logprobs", /20/],
    ["top_logprobs without logprobs", "/v1/chat/completions", { messages: MESSAGES, top_logprobs: 2 }, 400, "top_logprobs", /logprobs: true/],
    ["stream type", "/v1/chat/completions", { messages: MESSAGES, stream: "yes" }, 400, "stream", /boolean/],
    ["stream_options without stream", "/v1/chat/completions", { messages: MESSAGES, stream_options: { include_usage: true } }, 400, "stream_options", /stream is true/],
    ["stop strings", "/v1/chat/completions", { messages: MESSAGES, stop: ["\n"] }, 400, "stop", /not supported/],
    ["over the context", "/v1/chat/completions", { messages: MESSAGES, max_tokens: 250 }, 400, "max_tokens", /context is 256 tokens/],
    ["max_completion_tokens over", "/v1/chat/completions", { messages: MESSAGES, max_completion_tokens: 9999 }, 400, "max_completion_tokens", /context/],
    ["unknown model", "/v1/chat/completions", { model: "gpt-9", messages: MESSAGES }, 404, "model", /gpt-9/],
    ["token id out of range", "/v1/completions", { prompt: [1, 5, vocab.size] }, 400, "prompt[2]", /outside the vocabulary/],
    ["prompt type", "/v1/completions", { prompt: 42 }, 400, "prompt", /string or a non-empty array/],
    ["negative token", "/v1/completions", { prompt: [1, -3] }, 400, "prompt[1]", /must be >= 0, got -3/],
    ["prompt over the context", "/v1/completions", { prompt: new Array(300).fill(5) }, 400, "prompt", /over the context of 256/],
    ["echo", "/v1/completions", { prompt: "x", echo: true }, 400, "echo", /echo/],
    ["max_tokens 0", "/v1/completions", { prompt: "x", max_tokens: 0 }, 400, "max_tokens", /1/],
    ["negative max_tokens", "/v1/completions", { prompt: "x", max_tokens: -5 }, 400, "max_tokens", /must be >= 1, got -5/],
    ["absurd max_tokens", "/v1/completions", { prompt: "x", max_tokens: 1e12 }, 400, "max_tokens", /context is 256 tokens/],
    ["absurd max_tokens (chat)", "/v1/chat/completions", { messages: MESSAGES, max_tokens: 1e12 }, 400, "max_tokens", /context is 256 tokens/],
    ["fractional max_tokens", "/v1/completions", { prompt: "x", max_tokens: 1.5 }, 400, "max_tokens", /int/],
    ["max_tokens type", "/v1/completions", { prompt: "x", max_tokens: "16" }, 400, "max_tokens", /number/],
    ["messages type", "/v1/chat/completions", { messages: "hi" }, 400, "messages", /array/],
    ["content type", "/v1/chat/completions", { messages: [{ role: "user", content: 7 }] }, 400, "messages[0].content", /string or an array/],
    ["seed type", "/v1/completions", { prompt: "x", seed: 1.5 }, 400, "seed", /int/],
    ["unknown model (completions)", "/v1/completions", { model: "nope", prompt: "x" }, 404, "model", /nope/],
    ["streamed request over the context", "/v1/completions", { prompt: "x", max_tokens: 9999, stream: true }, 400, "max_tokens", /context/],
    ["streamed unknown model", "/v1/chat/completions", { model: "m2", messages: MESSAGES, stream: true }, 404, "model", /m2/],
    ["tokenize: prompt type", "/tokenize", { prompt: 5 }, 400, "prompt", /string/],
    ["tokenize: unknown model", "/tokenize", { model: "x", prompt: "a" }, 404, "model", /`x`/],
    ["detokenize: out of vocabulary", "/detokenize", { tokens: [1, vocab.size + 3] }, 400, "tokens[1]", /outside the vocabulary/],
    ["detokenize: negative", "/detokenize", { tokens: [-1] }, 400, "tokens[0]", /must be >= 0, got -1/],
    ["load_weights: missing path", "/v1/load_weights", { policy_version: 9 }, 400, "model_path", /GGUF/],
    ["load_weights: version type", "/v1/load_weights", { model_path: "/x.gguf", policy_version: "9" }, 400, "policy_version", /number/],
    ["load_weights: in_flight", "/v1/load_weights", { model_path: "/x.gguf", policy_version: 9, in_flight: "later" }, 400, "in_flight", /finish/],
    ["load_weights: stale version", "/v1/load_weights", { model_path: "/x.gguf", policy_version: 3 }, 400, "policy_version", /greater than the current policy version 3/],
    ["sleep level", "/sleep?level=3", {}, 400, "level", /1 or 2/],
  ];
  it.each(cases)("%s", async (_name, path, payload, status, param, message) => {
    const res = await post(path, payload);
    expect(res.status).toBe(status);
    expect(res.body.error.param).toBe(param);
    expect(res.body.error.message).toMatch(message);
    if (status === 400) expect(res.body.error.type).toBe("invalid_request_error");
  });

  it("answers malformed JSON with a 400 in OpenAI's error shape", async () => {
    const res = await server.app.inject({ method: "POST", url: "/v1/completions", headers: { "content-type": "application/json" }, payload: "{nope" });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.type).toBe("invalid_request_error");
  });

  it("answers bodies that are not objects, empty or of another type with a 4xx OpenAI error", async () => {
    for (const [payload, type] of [["[1,2]", "application/json"], ["null", "application/json"], ["", "application/json"], ["hello", "text/plain"]] as const) {
      for (const url of ["/v1/completions", "/v1/chat/completions", "/tokenize", "/v1/load_weights"]) {
        const res = await server.app.inject({ method: "POST", url, headers: { "content-type": type }, payload });
        expect(res.statusCode, `${url} ${payload}`).toBeGreaterThanOrEqual(400);
        expect(res.statusCode, `${url} ${payload}`).toBeLessThan(500);
        expect(typeof res.json().error.message).toBe("string");
      }
    }
    // 1e400 parses as Infinity: not a number zod accepts.
    const inf = await server.app.inject({ method: "POST", url: "/v1/completions", headers: { "content-type": "application/json" }, payload: '{"prompt": "x", "max_tokens": 1e400}' });
    expect(inf.statusCode).toBe(400);
    expect(inf.json().error.param).toBe("max_tokens");
    // The engine still serves after all that.
    expect((await post("/v1/completions", { prompt: "hi", max_tokens: 2 })).status).toBe(200);
  });
});

describe("serving", () => {
  it("lists the model, reports health and exports vLLM's metric names", async () => {
    expect((await post("/v1/completions", { prompt: "hi", max_tokens: 2 })).status).toBe(200);
    const models = (await server.app.inject({ url: "/v1/models" })).json();
    expect(models.data[0]).toMatchObject({ id: "arbor-tiny", object: "model", owned_by: "arbor", max_model_len: 256 });
    const health = await server.app.inject({ url: "/health" });
    expect(health.statusCode).toBe(200);
    const metrics = (await server.app.inject({ url: "/metrics" })).body;
    for (const name of [
      "vllm:num_requests_running",
      "vllm:num_requests_waiting",
      "vllm:kv_cache_usage_perc",
      "vllm:prefix_cache_queries_total",
      "vllm:prefix_cache_hits_total",
      "vllm:num_preemptions_total",
      "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total",
    ]) {
      expect(metrics).toMatch(new RegExp(`^${name}\\{model_name="arbor-tiny"\\} \\S+$`, "m"));
    }
    expect(metrics).toMatch(/^vllm:request_success_total\{finished_reason="stop",model_name="arbor-tiny"\} \d+$/m);
    expect(metrics).toMatch(/^vllm:cache_config_info\{block_size="1",num_gpu_blocks="512",model_name="arbor-tiny"\} 1$/m);
    expect(Number(/^vllm:generation_tokens_total\S* (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
  });

  it("batches concurrent requests and gives each the tokens it gets alone", async () => {
    const reqA = { prompt: [vocab.bosId, ...vocab.encode("abc")], max_tokens: 24, temperature: 1, seed: 21, return_token_ids: true, logprobs: 0 };
    const reqB = { prompt: [vocab.bosId, ...vocab.encode("xyz!")], max_tokens: 24, temperature: 1, seed: 22, return_token_ids: true, logprobs: 0 };
    const aloneA = (await post("/v1/completions", reqA)).body.choices[0];
    const aloneB = (await post("/v1/completions", reqB)).body.choices[0];
    // Precondition for a meaningful overlap: neither stops almost at once.
    expect(aloneA.token_ids.length).toBeGreaterThanOrEqual(8);
    expect(aloneB.token_ids.length).toBeGreaterThanOrEqual(8);

    let done = false;
    let peak = 0;
    const both = Promise.all([post("/v1/completions", reqA), post("/v1/completions", reqB)]).finally(() => (done = true));
    for (let polls = 0; !done && polls < 100_000; polls++) {
      const text = (await server.app.inject({ url: "/metrics" })).body;
      peak = Math.max(peak, Number(/^vllm:num_requests_running\S* (\d+)$/m.exec(text)?.[1] ?? 0));
      // inject settles in microtasks; yield so llama.cpp's batch dispatch (setImmediate) can run.
      await new Promise((r) => setImmediate(r));
    }
    const [a, b] = (await both).map((r) => r.body.choices[0]);
    expect(peak).toBe(2);
    expect(a.token_ids).toEqual(aloneA.token_ids);
    expect(b.token_ids).toEqual(aloneB.token_ids);
    a.logprobs.token_logprobs.forEach((lp: number, i: number) => expect(lp).toBeCloseTo(aloneA.logprobs.token_logprobs[i], 4));
    b.logprobs.token_logprobs.forEach((lp: number, i: number) => expect(lp).toBeCloseTo(aloneB.logprobs.token_logprobs[i], 4));
  });

  it("stops a generation whose signal aborts, keeping the tokens so far", async () => {
    const ac = new AbortController();
    // One draw per sampled token at T > 0: abort right after the third.
    class AbortAfter3 extends Rng {
      private draws = 0;
      override float(): number {
        if (++this.draws === 3) ac.abort();
        return super.float();
      }
    }
    const result = await server.executor.generate({
      promptTokenIds: [vocab.bosId, ...vocab.encode("abc")],
      maxTokens: 24,
      temperature: 1,
      topP: 1,
      topLogprobs: 0,
      rng: new AbortAfter3(21),
      signal: ac.signal,
    });
    expect(result.finishReason).toBe("abort");
    expect(result.tokens).toHaveLength(3);
    expect(server.executor.stats().running).toBe(0);
  });

  it("refuses with 429 when every sequence is busy and the waiting line is full", async () => {
    const small = await createEngineServer({ name: "small", modelPath, policyVersion: 0, sequences: 1, contextSize: 128, maxWaiting: 0 });
    try {
      const first = post("/v1/completions", { prompt: [vocab.bosId, ...vocab.encode("abc")], max_tokens: 24, temperature: 0 }, small);
      for (let i = 0; small.executor.stats().running === 0 && i < 100_000; i++) await new Promise((r) => setImmediate(r));
      const second = await post("/v1/completions", { prompt: "abc", max_tokens: 2 }, small);
      expect(second.status).toBe(429);
      expect(second.body.error.message).toMatch(/queue is full \(limit 0\)/);
      const r1 = await first;
      expect(r1.status).toBe(200);
      expect(r1.body.choices[0].finish_reason).toBe("length"); // it really held the sequence throughout
    } finally {
      await small.close();
    }
  });

  it("aborts the generation when the HTTP client disconnects", async () => {
    let started!: () => void;
    const startedP = new Promise<void>((r) => (started = r));
    const real = server.executor;
    // Holds each request until its signal aborts, so the disconnect always lands mid-generation.
    const holding: Executor = {
      vocabSize: real.vocabSize,
      contextSize: real.contextSize,
      sequences: real.sequences,
      tokenize: (t) => real.tokenize(t),
      stats: () => real.stats(),
      close: async () => {},
      generate: (req: GenerateRequest) =>
        new Promise<GenerateResult>((resolve) => {
          req.signal?.addEventListener("abort", () => resolve({ tokens: [], finishReason: "abort" }));
          started();
        }),
    };
    const s = await startEngineServer({ name: "hold", modelPath, policyVersion: 0, sequences: 1, contextSize: 128, maxWaiting: 0, executor: holding });
    try {
      expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const req = httpRequest(`${s.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" } });
      req.on("error", () => {});
      req.end(JSON.stringify({ prompt: "abc", max_tokens: 4 }));
      await startedP;
      req.destroy();
      const aborted = async (): Promise<number> => {
        const text = (await s.app.inject({ url: "/metrics" })).body;
        return Number(/^vllm:request_success_total\{finished_reason="abort"\S* (\d+)$/m.exec(text)?.[1]);
      };
      for (let i = 0; (await aborted()) === 0 && i < 100_000; i++) await new Promise((r) => setImmediate(r));
      expect(await aborted()).toBe(1);
    } finally {
      await s.close();
    }
  });
});

interface SseResult {
  status: number;
  contentType: string | null;
  version: string | null;
  events: StreamEvent[];
  done: boolean;
}

/** POST over real HTTP and split the server-sent events (every event must be `data: ...`). */
async function sse(path: string, payload: Record<string, unknown>, target: ListeningEngineServer = server): Promise<SseResult> {
  const res = await fetch(`${target.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
  const raw = await res.text();
  const blocks = raw.split("\n\n");
  expect(blocks.pop()).toBe(""); // the stream ends with a blank line
  const events: StreamEvent[] = [];
  let done = false;
  for (const b of blocks) {
    expect(b.startsWith("data: ")).toBe(true);
    expect(done).toBe(false); // nothing after [DONE]
    const data = b.slice("data: ".length);
    if (data === "[DONE]") done = true;
    else events.push(JSON.parse(data) as StreamEvent);
  }
  return { status: res.status, contentType: res.headers.get("content-type"), version: res.headers.get("x-arbor-policy-version"), events, done };
}

/** The one choice of a content chunk. */
function only(e: StreamEvent): StreamEventChoice {
  expect(e.choices).toHaveLength(1);
  return e.choices[0]!;
}

describe("streaming", () => {
  it("streams chat chunks that add up to the non-streaming answer", async () => {
    const req = { messages: MESSAGES, max_tokens: 24, temperature: 1, seed: 77, logprobs: true, top_logprobs: 2, return_token_ids: true };
    const whole = await chat(req);
    const s = await sse("/v1/chat/completions", { ...req, stream: true, stream_options: { include_usage: true } });
    expect(s.status).toBe(200);
    expect(s.contentType).toMatch(/^text\/event-stream/);
    expect(s.version).toBe("3");
    expect(s.done).toBe(true);
    const usageChunk = s.events.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage).toEqual(whole.usage);
    const chunks = s.events.slice(0, -1);
    const ids = new Set(s.events.map((e) => e.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^chatcmpl-/);
    for (const e of s.events) {
      expect(e.object).toBe("chat.completion.chunk");
      expect(e.policy_version).toBe(3);
    }
    const first = chunks[0]!;
    expect(first.choices[0]?.delta).toEqual({ role: "assistant", content: "" });
    expect(first.prompt_token_ids).toEqual(whole.prompt_token_ids);
    const rest = chunks.slice(1).map(only);
    expect(rest.length).toBe(whole.choices[0]!.token_ids!.length); // one chunk per token
    expect(rest.slice(0, -1).every((c) => c.finish_reason === null)).toBe(true);
    expect(rest.at(-1)!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    expect(rest.map((c) => c.delta?.content).join("")).toBe(whole.choices[0]!.message.content);
    expect(rest.flatMap((c) => c.token_ids)).toEqual(whole.choices[0]!.token_ids);
    expect(rest.flatMap((c) => c.logprobs?.content ?? [])).toEqual(whole.choices[0]!.logprobs!.content);
  });

  it("streams text completions with prompt ids first, then a chunk per token", async () => {
    const req = { prompt: [vocab.bosId, ...vocab.encode("abc")], max_tokens: 20, temperature: 1, seed: 21, logprobs: 1, return_token_ids: true };
    const whole = (await post("/v1/completions", req)).body.choices[0];
    const s = await sse("/v1/completions", { ...req, stream: true });
    expect(s.status).toBe(200);
    expect(s.done).toBe(true);
    const choices = s.events.map((e) => {
      expect(e.object).toBe("text_completion");
      return only(e);
    });
    expect(s.events.every((e) => e.usage === undefined)).toBe(true); // no include_usage
    expect(choices[0]?.prompt_token_ids).toEqual(req.prompt);
    expect(choices.slice(1).every((c) => c.prompt_token_ids === undefined)).toBe(true);
    expect(choices.map((c) => c.text).join("")).toBe(whole.text);
    expect(choices.flatMap((c) => c.token_ids)).toEqual(whole.token_ids);
    expect(choices.flatMap((c) => c.logprobs?.token_logprobs ?? [])).toEqual(whole.logprobs.token_logprobs);
    expect(choices.at(-1)?.finish_reason).toBe(whole.finish_reason);
  });

  it("answers a streamed request refused before its first token with a plain JSON error", async () => {
    const small = await startEngineServer({ name: "small-stream", modelPath, policyVersion: 0, sequences: 1, contextSize: 128, maxWaiting: 0 });
    try {
      const first = post("/v1/completions", { prompt: [vocab.bosId, ...vocab.encode("abc")], max_tokens: 40, temperature: 0 }, small);
      for (let i = 0; small.executor.stats().running === 0 && i < 100_000; i++) await new Promise((r) => setImmediate(r));
      const res = await fetch(`${small.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "x", max_tokens: 2, stream: true }) });
      expect(res.status).toBe(429);
      expect(res.headers.get("content-type")).toMatch(/application\/json/);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe("requests");
      expect(res.headers.get("retry-after")).toBe("1");
      expect((await first).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it("aborts the generation when the client disconnects mid-stream", async () => {
    const real = server.executor;
    let generating = 0;
    // Sends one token, then holds until its signal aborts: the disconnect lands mid-stream.
    const oneThenHold: Executor = {
      vocabSize: real.vocabSize,
      contextSize: real.contextSize,
      sequences: real.sequences,
      tokenize: (t) => real.tokenize(t),
      stats: () => ({ running: generating, waiting: 0, usedTokens: 0, totalTokens: 256 }),
      close: async () => {},
      generate: (req: GenerateRequest) =>
        new Promise<GenerateResult>((resolve) => {
          generating++;
          const tok = { id: vocab.encode("a")[0]!, logprob: -1, top: [] };
          req.onToken?.(tok);
          req.signal?.addEventListener("abort", () => {
            generating--;
            resolve({ tokens: [tok], finishReason: "abort" });
          });
        }),
    };
    const s = await startEngineServer({ name: "hold-stream", modelPath, policyVersion: 0, sequences: 1, contextSize: 128, maxWaiting: 0, executor: oneThenHold });
    try {
      const got = await new Promise<string>((resolve, reject) => {
        const req = httpRequest(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
          res.once("data", (buf: Buffer) => {
            resolve(buf.toString());
            req.destroy();
          });
        });
        req.on("error", () => {});
        req.on("close", () => reject(new Error("closed before the first chunk")));
        req.end(JSON.stringify({ messages: MESSAGES, max_tokens: 50, stream: true }));
      });
      expect(got).toMatch(/^data: \{.*"role":"assistant"/);
      for (let i = 0; generating > 0 && i < 100_000; i++) await new Promise((r) => setImmediate(r));
      expect(generating).toBe(0);
      const metrics = (await s.app.inject({ url: "/metrics" })).body;
      expect(Number(/^vllm:request_success_total\{finished_reason="abort"\S* (\d+)$/m.exec(metrics)?.[1])).toBe(1);
      expect(s.slot.inFlight).toBe(0);
    } finally {
      await s.close();
    }
  });
});

describe("tokenize", () => {
  it("tokenizes a prompt as /v1/completions does, honouring add_special_tokens", async () => {
    const a = await post("/tokenize", { model: "arbor-tiny", prompt: "hello world" });
    expect(a.status).toBe(200);
    expect(a.body).toEqual({ count: 12, max_model_len: 256, tokens: [vocab.bosId, ...vocab.encode("hello world")] });
    const b = await post("/tokenize", { prompt: "hello world", add_special_tokens: false, return_token_strs: true });
    expect(b.body.tokens).toEqual(vocab.encode("hello world"));
    expect(b.body.token_strs.join("")).toBe("hello world");
  });

  it("tokenizes messages exactly as the chat endpoint renders them", async () => {
    const whole = await chat({ max_tokens: 2, seed: 1 });
    const t = await post("/tokenize", { messages: MESSAGES });
    expect(t.body.tokens).toEqual(whole.prompt_token_ids);
    expect(t.body.count).toBe(whole.prompt_token_ids!.length);
    const noGen = await post("/tokenize", { messages: MESSAGES, add_generation_prompt: false });
    expect(noGen.body.tokens).toEqual(whole.prompt_token_ids!.slice(0, -1));
    const extraBos = await post("/tokenize", { messages: MESSAGES, add_special_tokens: true });
    expect(extraBos.body.tokens).toEqual([vocab.bosId, ...whole.prompt_token_ids!]);
  });

  it("detokenizes token ids back to text", async () => {
    const ids = vocab.encode("2+3=5, é!");
    const d = await post("/detokenize", { tokens: [vocab.bosId, ...ids] });
    expect(d.status).toBe(200);
    expect(d.body).toEqual({ prompt: "2+3=5, é!" });
  });
});

describe("sleep and wake-up", () => {
  it("refuses inference with 503 while asleep, releases the executor and reloads it on wake-up", async () => {
    const s = await createEngineServer({ name: "sleepy", modelPath, policyVersion: 5, sequences: 1, contextSize: 128, maxWaiting: 2 });
    try {
      const req = { prompt: [vocab.bosId, ...vocab.encode("abc")], max_tokens: 8, temperature: 1, seed: 4, return_token_ids: true };
      const before = (await post("/v1/completions", req, s)).body.choices[0].token_ids;
      const inFlight = post("/v1/completions", { ...req, max_tokens: 30 }, s);
      for (let i = 0; s.executor.stats().running === 0 && i < 100_000; i++) await new Promise((r) => setImmediate(r));
      const asleepExecutor = s.executor;
      const slept = await post("/sleep?level=1", {}, s);
      expect(slept.status).toBe(200);
      expect(slept.body).toEqual({ is_sleeping: true, level: 1 });
      // The running request finished before the executor was released.
      const done = await inFlight;
      expect(done.status).toBe(200);
      expect(done.body.choices[0].finish_reason).not.toBe("abort");
      expect((await s.app.inject({ url: "/is_sleeping" })).json()).toEqual({ is_sleeping: true });
      for (const [path, body] of [["/v1/completions", req], ["/v1/chat/completions", { messages: MESSAGES }]] as const) {
        const r = await post(path, body, s);
        expect(r.status).toBe(503);
        expect(r.body.error).toMatchObject({ type: "server_error", code: "engine_sleeping" });
      }
      expect((await post("/tokenize", { prompt: "abc" }, s)).status).toBe(200);
      expect((await post("/v1/load_weights", { model_path: modelPath, policy_version: 6 }, s)).status).toBe(503);
      expect((await post("/sleep?level=2", {}, s)).body.is_sleeping).toBe(true);
      await expect(asleepExecutor.generate({ ...GEN, rng: new Rng(1) })).rejects.toThrow(/shut down/);

      const woke = await post("/wake_up", {}, s);
      expect(woke.body).toEqual({ is_sleeping: false });
      expect(s.executor).not.toBe(asleepExecutor);
      const after = await post("/v1/completions", req, s);
      expect(after.status).toBe(200);
      expect(after.body.choices[0].token_ids).toEqual(before);
      expect(after.body.policy_version).toBe(5);
      expect((await post("/wake_up", {}, s)).status).toBe(200); // awake: a no-op
    } finally {
      await s.close();
    }
  });
});

const GEN = { promptTokenIds: [1, 40], maxTokens: 2, temperature: 0, topP: 1, topLogprobs: 0 };
