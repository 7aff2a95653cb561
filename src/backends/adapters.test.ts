// Error paths of the token-level adapters that the shared contract does not reach: upstream error
// answers, answers missing the fields a trainable trace needs, bad requests and bad urls.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { BackendHttpError, BackendProtocolError, BackendUnreachableError, isTokenBackend } from "./backend.js";
import { createBuiltinBackend } from "./builtin.js";
import { startFixtureServer, type FixtureReply, type FixtureServer } from "../testing/fixture-server.js";
import { createLlamacppBackend } from "./llamacpp.js";
import { createBackend } from "./registry.js";
import { createSglangBackend } from "./sglang.js";
import { applyStopTokens } from "./token-result.js";
import { createArborBackend, createVllmBackend } from "./vllm.js";

let next: FixtureReply = { json: {} };
let server: FixtureServer;
beforeAll(async () => {
  server = await startFixtureServer(() => next);
});
afterAll(() => server.close());

const req = { promptTokenIds: [1, 2, 3], maxTokens: 2, temperature: 0 };
const choice = (extra: object) => ({ choices: [{ index: 0, text: "ab", finish_reason: "length", logprobs: { token_logprobs: [-1, -2] }, token_ids: [5, 6], prompt_token_ids: [1, 2, 3], ...extra }] });

describe("token-level adapters", () => {
  it("turn an upstream error answer into BackendHttpError with the engine's message", async () => {
    next = { status: 400, json: { error: { message: "prompt: too long", type: "BadRequestError", code: 400 } } };
    const e = await createVllmBackend({ name: "v", url: server.root }).generate(req).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(BackendHttpError);
    expect((e as BackendHttpError).status).toBe(400);
    expect((e as Error).message).toBe(`backend 'v' at ${server.root}/v1 answered HTTP 400: POST /v1/completions: prompt: too long`);
    next = { status: 503, text: "<html>down</html>" };
    await expect(createSglangBackend({ name: "s", url: server.root }).generate(req)).rejects.toThrow("answered HTTP 503: POST /generate: <html>down</html>");
  });

  it("refuse answers that cannot make a trainable trace", async () => {
    const v = createVllmBackend({ name: "v", url: server.root });
    next = { json: choice({ token_ids: undefined }) };
    await expect(v.generate(req)).rejects.toThrow("returned no choices[0].token_ids");
    next = { json: choice({ logprobs: { token_logprobs: [-1] } }) };
    await expect(v.generate(req)).rejects.toThrow("returned 1 logprobs for 2 output tokens");
    next = { json: choice({ finish_reason: "error" }) };
    await expect(v.generate(req)).rejects.toThrow('returned finish_reason "error"');
    next = { json: choice({}) };
    expect((await v.generate(req)).policyVersion).toBeNull();
    await expect(createArborBackend({ name: "a", url: server.root }).generate(req)).rejects.toThrow("returned no policy_version");

    next = { json: { text: "", meta_info: { finish_reason: { type: "stop" } } } };
    await expect(createSglangBackend({ name: "s", url: server.root }).generate(req)).rejects.toBeInstanceOf(BackendProtocolError);
    next = { json: { output_ids: [9], meta_info: { finish_reason: { type: "stop" }, output_token_logprobs: [[-0.5, 8, null]] } } };
    await expect(createSglangBackend({ name: "s", url: server.root }).generate(req)).rejects.toThrow("output_ids that differ");

    next = { json: { tokens: [7, 8], stop_type: "eos", completion_probabilities: [{ id: 7, logprob: -1 }, { id: 9, logprob: -1 }] } };
    await expect(createLlamacppBackend({ name: "l", url: server.root }).generate(req)).rejects.toThrow("completion_probabilities[1].id 9 for token 8");
    next = { json: { tokens: [7], stop_type: "eos", completion_probabilities: [{ id: 7, prob: 0.5 }] } };
    await expect(createLlamacppBackend({ name: "l", url: server.root }).generate(req)).rejects.toThrow("invalid logprob at output token 0: undefined");
  });

  it("check requests before sending and name the field", async () => {
    const v = createVllmBackend({ name: "v", url: server.root });
    await expect(v.generate({ ...req, promptTokenIds: [] })).rejects.toThrow("promptTokenIds: must be a non-empty list");
    await expect(v.generate({ ...req, maxTokens: 0 })).rejects.toThrow("maxTokens: must be an integer >= 1, got 0");
    await expect(v.generate({ ...req, topP: 2 })).rejects.toThrow("topP: must be in (0, 1], got 2");
  });

  it("pause on llama-server needs the program to hold a slot; restore needs a pause", async () => {
    const l = createLlamacppBackend({ name: "l", url: server.root });
    next = { json: { total_slots: 2, default_generation_settings: { n_ctx: 512 } } };
    await expect(l.pause!("ghost")).rejects.toThrow("program 'ghost' holds no slot to pause");
    await expect(l.restore!("ghost")).rejects.toThrow("program 'ghost' is not paused here");
  });

  it("fail a program's pause or restore that the engine does not answer within the admin timeout, on the clock", async () => {
    const clock = new VirtualClock();
    const a = createArborBackend({ name: "a", url: server.root, clock, adminTimeoutMs: 500 });
    server.hold();
    try {
      const before = server.requests.length;
      const p = a.pause!("p1");
      await server.waitForRequests(before + 1);
      clock.advance(499);
      let settled = false;
      void p.then(
        () => (settled = true),
        () => (settled = true),
      );
      await new Promise((r) => setImmediate(r));
      expect(settled).toBe(false);
      clock.advance(1);
      const e = await p.catch((x: unknown) => x);
      expect(e).toBeInstanceOf(BackendUnreachableError);
      expect((e as Error).message).toBe(`backend 'a' at ${server.root}/v1 is not reachable: no answer to POST /v1/programs/p1/pause within 500 ms`);
    } finally {
      server.release();
    }
  });

  it("accept a root or /v1 url and reject bad ones", () => {
    expect(createSglangBackend({ name: "s", url: "http://h:30000/" }).url).toBe("http://h:30000/v1");
    expect(createLlamacppBackend({ name: "l", url: "http://h:8080/v1" }).url).toBe("http://h:8080/v1");
    expect(() => createVllmBackend({ name: "v", url: "nope" })).toThrow("backend 'v' url: not a valid URL: 'nope'");
    expect(() => createSglangBackend({ name: "s", url: "ftp://h" })).toThrow("must be http or https");
  });

  it("registry builds token backends; the bare v0 adapter is not one", () => {
    for (const type of ["builtin", "vllm", "sglang", "llamacpp", "openai"] as const) {
      const b = createBackend({ name: type, type, url: "http://127.0.0.1:9/v1" });
      expect([b.type, isTokenBackend(b)]).toEqual([type, true]);
    }
    expect(isTokenBackend(createBuiltinBackend({ name: "x", url: "http://h/v1" }))).toBe(false);
  });

  it("applies stop tokens only where the engine ran past them", () => {
    const r = { outputTokenIds: [4, 5, 6], logprobs: [-1, -2, -3], finishReason: "length" as const, policyVersion: null, promptTokenIds: [1] };
    expect(applyStopTokens(r, [5])).toEqual({ ...r, outputTokenIds: [4, 5], logprobs: [-1, -2], finishReason: "stop" });
    expect(applyStopTokens(r, [6]).finishReason).toBe("stop");
    expect(applyStopTokens(r, [9])).toBe(r);
    expect(applyStopTokens(r, undefined)).toBe(r);
  });
});
