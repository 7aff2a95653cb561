import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import { createEngineServer, type EngineServer } from "../server.js";
import { gatedExecutor, post, step, until } from "../../testing/engine-http-helpers.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();

describe("weight switch on real GGUFs", () => {
  let dir: string;
  let pathA: string;
  let pathB: string;
  let server: EngineServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-weights-"));
    pathA = ensurePolicy(join(dir, "a"), INIT).path;
    pathB = ensurePolicy(join(dir, "b"), { ...INIT, seed: 2 }).path;
    server = await createEngineServer({ name: "w", modelPath: pathA, policyVersion: 1, sequences: 1, contextSize: 128, maxWaiting: 4 });
  });

  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const REQ = { prompt: [vocab.bosId, ...vocab.encode("12+30=")], max_tokens: 12, temperature: 1, seed: 8, logprobs: 0, return_token_ids: true };

  it("serves the new version at once, each version reproducing its own tokens", async () => {
    const onA = await post(server, "/v1/completions", REQ);
    expect(onA.body.policy_version).toBe(1);
    expect(onA.headers["x-arbor-policy-version"]).toBe("1");
    expect(onA.body.choices[0].token_policy_versions).toEqual(onA.body.choices[0].token_ids.map(() => 1));
    const oldExecutor = server.executor;

    const load = await post(server, "/v1/load_weights", { model_path: pathB, policy_version: 2 });
    expect(load.status).toBe(200);
    expect(load.body).toMatchObject({ policy_version: 2, previous_policy_version: 1, model_path: pathB, in_flight: "finish", in_flight_requests: 0 });
    expect((await server.app.inject({ url: "/v1/policy_version" })).json()).toEqual({ policy_version: 2, model_path: pathB, is_sleeping: false });
    // The old executor had nothing in flight: it is closed once the switch is made.
    await until(() => oldExecutor.stats().totalTokens > 0 && server.slot.inFlight === 0);
    await expect(oldExecutor.generate({ promptTokenIds: [1], maxTokens: 1, temperature: 0, topP: 1, topLogprobs: 0, rng: undefined as never })).rejects.toThrow(/shut down/);

    const onB = await post(server, "/v1/completions", REQ);
    expect(onB.body.policy_version).toBe(2);
    expect(onB.headers["x-arbor-policy-version"]).toBe("2");
    expect(onB.body.choices[0].logprobs.token_logprobs).not.toEqual(onA.body.choices[0].logprobs.token_logprobs);
    expect((await post(server, "/v1/completions", REQ)).body.choices[0].token_ids).toEqual(onB.body.choices[0].token_ids);

    // Back to A's weights as version 3: A's tokens and logprobs again.
    expect((await post(server, "/v1/load_weights", { model_path: pathA, policy_version: 3, in_flight: "abort" })).status).toBe(200);
    const onA2 = await post(server, "/v1/completions", REQ);
    expect(onA2.body.policy_version).toBe(3);
    expect(onA2.body.choices[0].token_ids).toEqual(onA.body.choices[0].token_ids);
    expect(onA2.body.choices[0].logprobs.token_logprobs).toEqual(onA.body.choices[0].logprobs.token_logprobs);
    const models = (await server.app.inject({ url: "/v1/models" })).json();
    expect(models.data[0]).toMatchObject({ root: pathA, policy_version: 3 });
  });

  it("keeps counting what the executor a switch replaced did: /metrics scraped only after the switch", async () => {
    const scheduled = await createEngineServer({ name: "c", modelPath: pathA, policyVersion: 1, sequences: 1, contextSize: 128, maxWaiting: 4, executorKind: "llamacpp-scheduled" });
    try {
      const counter = async (name: string): Promise<number> => Number(new RegExp(`^${name}\\S* (\\d+)$`, "m").exec((await scheduled.app.inject({ url: "/metrics" })).body)?.[1]);
      expect((await post(scheduled, "/v1/completions", REQ)).status).toBe(200);
      expect((await post(scheduled, "/v1/completions", REQ)).status).toBe(200);
      expect((await post(scheduled, "/v1/load_weights", { model_path: pathB, policy_version: 2 })).status).toBe(200);
      expect((await post(scheduled, "/v1/completions", REQ)).status).toBe(200);
      // Every request's prompt was looked up once: two on version 1's executor, one on version 2's.
      expect(await counter("vllm:prefix_cache_queries_total")).toBe(3 * REQ.prompt.length);
      expect(scheduled.slot.counters().prefixCacheQueries).toBe(3 * REQ.prompt.length);
    } finally {
      await scheduled.close();
    }
  });

  it("refuses a version that is not newer, and keeps serving when the file cannot be loaded", async () => {
    const current = server.slot.policyVersion;
    const stale = await post(server, "/v1/load_weights", { model_path: pathB, policy_version: current });
    expect(stale.status).toBe(400);
    expect(stale.body.error.param).toBe("policy_version");

    const missing = join(dir, "missing.gguf");
    const bad = await post(server, "/v1/load_weights", { model_path: missing, policy_version: current + 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe("model_path");
    expect(bad.body.error.message).toContain(missing);

    const garbage = join(dir, "garbage.gguf");
    writeFileSync(garbage, "not a gguf");
    const bad2 = await post(server, "/v1/load_weights", { model_path: garbage, policy_version: current + 1 });
    expect(bad2.status).toBe(400);
    expect(bad2.body.error.message).toContain(garbage);

    const still = await post(server, "/v1/completions", REQ);
    expect(still.status).toBe(200);
    expect(still.body.policy_version).toBe(current);
  });
});

describe("in-flight requests on a weight switch", () => {
  async function setup(defaultInFlight?: "finish" | "abort") {
    const a = gatedExecutor("a");
    const b = gatedExecutor("b");
    const server = await createEngineServer({
      name: "gated",
      modelPath: "/a.gguf",
      policyVersion: 1,
      sequences: 2,
      contextSize: 128,
      maxWaiting: 2,
      executor: a,
      loadExecutor: async (path) => {
        if (path !== "/b.gguf") throw new Error(`no such file ${path}`);
        return b;
      },
      ...(defaultInFlight ? { inFlightOnWeightSwitch: defaultInFlight } : {}),
    });
    return { a, b, server };
  }

  it("finish: the running request completes on the old version, new ones go to the new at once", async () => {
    const { a, b, server } = await setup();
    try {
      const old = post(server, "/v1/completions", { prompt: "x", max_tokens: 3 });
      await until(() => a.running === 1);
      await step(a);
      const load = await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2 });
      expect(load.body).toMatchObject({ in_flight: "finish", in_flight_requests: 1 });
      const fresh = post(server, "/v1/completions", { prompt: "x", max_tokens: 2 });
      await until(() => b.running === 1);
      expect(a.running).toBe(1);
      await step(b);
      await step(b);
      const f = await fresh;
      expect(f.body).toMatchObject({ policy_version: 2, choices: [{ text: "bb", finish_reason: "length" }] });
      expect(a.closed).toBe(false); // injected: never closed by the engine
      await step(a);
      await step(a);
      const o = await old;
      expect(o.body).toMatchObject({ policy_version: 1, choices: [{ text: "aaa", finish_reason: "length" }] });
      expect(o.headers["x-arbor-policy-version"]).toBe("1");
      expect(server.slot.inFlight).toBe(0);
    } finally {
      await server.close();
    }
    expect(b.closed).toBe(true); // loaded by the engine: closed with it
  });

  it("abort: running requests end with finish_reason abort on the old version (configured default)", async () => {
    const { a, b, server } = await setup("abort");
    try {
      const old = post(server, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 5, return_token_ids: true });
      await until(() => a.running === 1);
      await step(a);
      const load = await post(server, "/v1/load_weights", { model_path: "/b.gguf", policy_version: 2 });
      expect(load.body).toMatchObject({ in_flight: "abort", in_flight_requests: 1 });
      const o = await old;
      expect(o.status).toBe(200);
      expect(o.body.policy_version).toBe(1);
      expect(o.body.choices[0]).toMatchObject({ finish_reason: "abort", message: { content: "a" }, token_ids: [vocab.encode("a")[0]], token_policy_versions: [1] });
      expect(b.running).toBe(0);
      const bad = await post(server, "/v1/load_weights", { model_path: "/c.gguf", policy_version: 3 });
      expect(bad.status).toBe(400);
      expect(bad.body.error.message).toContain("/c.gguf");
      expect(server.slot.policyVersion).toBe(2);
    } finally {
      await server.close();
    }
  });
});
