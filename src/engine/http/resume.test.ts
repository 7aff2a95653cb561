import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Rng } from "../../core/rng.js";
import { PositionKeyedRng } from "../position-keyed-rng.js";
import { stopTokenIds } from "../../model/chat-template.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import type { Executor, ExecutorStats, GenerateRequest, GenerateResult } from "../executor.js";
import { LlamaCppExecutor } from "../llamacpp-executor.js";
import type { SampledToken } from "../sampling.js";
import { createEngineServer, type EngineServer } from "../server.js";
import { gatedExecutor, post, step, until, type GatedExecutorOptions } from "../../testing/engine-http-helpers.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const A = vocab.encode("a")[0]!;
const B = vocab.encode("b")[0]!;

/**
 * Wraps a real executor: a generation stops itself after `pauseAfter` tokens, then waits until its
 * request is aborted (the weight switch) and ends with "abort", so the switch lands after exactly
 * that many tokens.
 */
class PausingExecutor implements Executor {
  paused = false;

  constructor(
    private readonly inner: Executor,
    private readonly pauseAfter: number,
  ) {}

  get vocabSize(): number {
    return this.inner.vocabSize;
  }
  get contextSize(): number {
    return this.inner.contextSize;
  }
  get sequences(): number {
    return this.inner.sequences;
  }
  tokenize(text: string): number[] {
    return this.inner.tokenize(text);
  }
  stats(): ExecutorStats {
    return this.inner.stats();
  }
  async close(): Promise<void> {}

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const stop = new AbortController();
    let n = 0;
    const onToken = (tok: SampledToken): void => {
      req.onToken?.(tok);
      if (++n === this.pauseAfter) stop.abort();
    };
    const result = await this.inner.generate({ ...req, signal: stop.signal, onToken });
    if (result.finishReason !== "abort") return result;
    this.paused = true;
    const signal = req.signal;
    if (signal && !signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    return result;
  }
}

describe("in_flight resume on real GGUFs", () => {
  let dir: string;
  let pathA: string;
  let pathB: string;
  let execA: LlamaCppExecutor;
  let execB: LlamaCppExecutor;
  let server: EngineServer | undefined;
  const shape = { sequences: 1, contextSize: 128, maxWaiting: 4, stopTokenIds: stopTokenIds(vocab) };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-resume-"));
    pathA = ensurePolicy(join(dir, "a"), INIT).path;
    pathB = ensurePolicy(join(dir, "b"), { ...INIT, seed: 2 }).path;
    execA = await LlamaCppExecutor.load({ ...shape, modelPath: pathA });
    execB = await LlamaCppExecutor.load({ ...shape, modelPath: pathB });
  });

  afterAll(async () => {
    await server?.close();
    await execA?.close();
    await execB?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("continues on the new weights with the same Rng stream: old tokens, then the new version's", async () => {
    const prompt = [vocab.bosId, ...vocab.encode("12+30=")];
    const N = 10;
    const K = 4;
    const SEED = 8;
    const gen = (ex: Executor, p: number[], maxTokens: number, rng: Rng) =>
      ex.generate({ promptTokenIds: p, maxTokens, temperature: 1, topP: 1, topLogprobs: 0, rng });
    // What the old version alone gives, and what a switch after K tokens must give.
    // An HTTP `seed` gives the request a PositionKeyedRng (what the engine's requestRng builds).
    const onlyA = await gen(execA, prompt, N, PositionKeyedRng.fromSeed(SEED));
    const rng = PositionKeyedRng.fromSeed(SEED);
    const head = await gen(execA, prompt, K, rng);
    const tail = await gen(execB, [...prompt, ...head.tokens.map((t) => t.id)], N - K, rng);
    expect(head.finishReason).toBe("length");
    expect(head.tokens).toEqual(onlyA.tokens.slice(0, K));
    const expected = [...head.tokens, ...tail.tokens];

    const pausing = new PausingExecutor(execA, K);
    server = await createEngineServer({
      name: "resume",
      modelPath: pathA,
      policyVersion: 1,
      ...shape,
      executor: pausing,
      loadExecutor: async (path) => {
        if (path !== pathB) throw new Error(`no such file ${path}`);
        return execB;
      },
      inFlightOnWeightSwitch: "resume",
    });
    const running = post(server, "/v1/completions", { prompt, max_tokens: N, temperature: 1, seed: SEED, logprobs: 0, return_token_ids: true });
    await until(() => pausing.paused);
    const load = await post(server, "/v1/load_weights", { model_path: pathB, policy_version: 2 });
    expect(load.body).toMatchObject({ policy_version: 2, in_flight: "resume", in_flight_requests: 1 });
    const res = await running;
    expect(res.status).toBe(200);
    const choice = res.body.choices[0];
    expect(choice.token_ids).toEqual(expected.map((t) => t.id));
    expect(choice.logprobs.token_logprobs).toEqual(expected.map((t) => t.logprob));
    expect(choice.text).toBe(vocab.decode(expected.filter((t) => !shape.stopTokenIds.includes(t.id)).map((t) => t.id)));
    expect(choice.finish_reason).toBe(tail.finishReason);
    expect(choice.token_policy_versions).toEqual([...head.tokens.map(() => 1), ...tail.tokens.map(() => 2)]);
    expect(res.body.policy_version).toBe(2);
    expect(res.headers["x-arbor-policy-version"]).toBe("2");
    expect(res.body.usage).toMatchObject({ prompt_tokens: prompt.length, completion_tokens: expected.length });
  });
});

describe("in_flight resume with gated executors", () => {
  async function setup(aOpts: GatedExecutorOptions = {}) {
    const a = gatedExecutor("a", aOpts);
    const b = gatedExecutor("b");
    const c = gatedExecutor("c");
    const server = await createEngineServer({
      name: "gated",
      modelPath: "/a.gguf",
      policyVersion: 1,
      sequences: 2,
      contextSize: 128,
      maxWaiting: 2,
      executor: a,
      loadExecutor: async (path) => {
        if (path === "/b.gguf") return b;
        if (path === "/c.gguf") return c;
        throw new Error(`no such file ${path}`);
      },
    });
    return { a, b, c, server };
  }

  it("one answer: prompt + tokens so far, remaining budget, same sampling and Rng on the new version", async () => {
    const { a, b, server } = await setup();
    try {
      const running = post(server, "/v1/completions", { prompt: "x", max_tokens: 5, temperature: 0.7, top_p: 0.9, return_token_ids: true });
      await until(() => a.running === 1);
      await step(a);
      await step(a);
      const load = await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2, in_flight: "resume" });
      expect(load.body).toMatchObject({ in_flight: "resume", in_flight_requests: 1 });
      await until(() => b.running === 1);
      const [first] = a.requests;
      const [resumed] = b.requests;
      expect(resumed!.promptTokenIds).toEqual([...first!.promptTokenIds, A, A]);
      expect(resumed).toMatchObject({ maxTokens: 3, temperature: 0.7, topP: 0.9 });
      expect(resumed!.rng).toBe(first!.rng);
      for (let i = 0; i < 3; i++) await step(b);
      const res = await running;
      expect(res.body).toMatchObject({
        policy_version: 2,
        choices: [{ text: "aabbb", finish_reason: "length", token_ids: [A, A, B, B, B], token_policy_versions: [1, 1, 2, 2, 2] }],
        usage: { completion_tokens: 5 },
      });
      expect(res.headers["x-arbor-policy-version"]).toBe("2");
      expect(server.slot.inFlight).toBe(0);
      expect(a.running).toBe(0);
    } finally {
      await server.close();
    }
  });

  it("a stream goes on across the switch, chunks reporting the version of their tokens", async () => {
    const { a, b, c, server } = await setup();
    try {
      const running = server.app.inject({
        method: "POST",
        url: "/v1/chat/completions",
        payload: { messages: [{ role: "user", content: "hi" }], max_tokens: 4, stream: true, return_token_ids: true },
      });
      await until(() => a.running === 1);
      await step(a);
      expect((await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2, in_flight: "resume" })).status).toBe(200);
      await until(() => b.running === 1);
      await step(b);
      // A second switch during the same request: it moves on again.
      expect((await post(server, "/v1/load_weights", { model_path: "/c.gguf", policy_version: 3, in_flight: "resume" })).status).toBe(200);
      await until(() => c.running === 1);
      await step(c);
      await step(c);
      const res = await running;
      expect(res.statusCode).toBe(200);
      const events = res.body
        .split("\n\n")
        .filter((e) => e.startsWith("data: "))
        .map((e) => e.slice(6));
      expect(events.at(-1)).toBe("[DONE]");
      expect(events.filter((e) => e === "[DONE]")).toHaveLength(1);
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      const tokenChunks = chunks.filter((ch) => ch.choices[0]?.token_ids?.length);
      expect(tokenChunks.map((ch) => ch.choices[0].delta.content).join("")).toBe("abcc");
      expect(tokenChunks.map((ch) => ch.policy_version)).toEqual([1, 2, 3, 3]);
      expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
      // Headers went out with the first token, on version 1.
      expect(res.headers["x-arbor-policy-version"]).toBe("1");
    } finally {
      await server.close();
    }
  });

  it("a request that already reached max_tokens or a stop token just finishes on the old version", async () => {
    for (const [opts, maxTokens, finish] of [
      [{ lateAbort: true }, 2, "length"],
      [{ lateAbort: true, stopAt: 1 }, 5, "stop"],
    ] as const) {
      const { a, b, server } = await setup(opts);
      try {
        const running = post(server, "/v1/completions", { prompt: "x", max_tokens: maxTokens, return_token_ids: true });
        await until(() => a.running === 1);
        await step(a);
        await step(a);
        // Both tokens are out; the generation waits one more tick, so the switch aborts it.
        await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2, in_flight: "resume" });
        const res = await running;
        expect(res.body.choices[0]).toMatchObject({ finish_reason: finish, token_policy_versions: [1, 1] });
        expect(res.body.choices[0].token_ids).toHaveLength(2);
        expect(res.body.policy_version).toBe(1);
        expect(b.requests).toHaveLength(0);
      } finally {
        await server.close();
      }
    }
  });

  it("a failed load leaves the old version serving and running requests untouched", async () => {
    const { a, b, server } = await setup();
    try {
      const running = post(server, "/v1/completions", { prompt: "x", max_tokens: 3, return_token_ids: true });
      await until(() => a.running === 1);
      await step(a);
      const bad = await post(server, "/v1/load_weights", { model_path: "/missing.gguf", policy_version: 2, in_flight: "resume" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.param).toBe("model_path");
      expect(server.slot.policyVersion).toBe(1);
      await step(a);
      await step(a);
      const res = await running;
      expect(res.body).toMatchObject({ policy_version: 1, choices: [{ text: "aaa", finish_reason: "length", token_policy_versions: [1, 1, 1] }] });
      expect(a.requests).toHaveLength(1);
      expect(b.requests).toHaveLength(0);
    } finally {
      await server.close();
    }
  });

  it("shutting down aborts a resumed request on the new version", async () => {
    const { a, b, server } = await setup();
    try {
      const running = post(server, "/v1/completions", { prompt: "x", max_tokens: 5 });
      await until(() => a.running === 1);
      await step(a);
      await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2, in_flight: "resume" });
      await until(() => b.running === 1);
      await server.close();
      await running.catch(() => undefined);
      await until(() => b.running === 0);
      expect(b.requests[0]!.signal?.aborted).toBe(true);
    } finally {
      await server.close();
    }
  });

  it("names resume among the in_flight choices", async () => {
    const { server } = await setup();
    try {
      const bad = await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2, in_flight: "later" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain('"resume"');
    } finally {
      await server.close();
    }
  });
});
