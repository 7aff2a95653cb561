import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Backend, BackendReply } from "../backends/backend.js";
import { createBuiltinBackend } from "../backends/builtin.js";
import { fakeChatPrompt, fakeLogprob, fakeReplyText, fakeTokenize, startFakeVllm, type FakeVllm } from "../backends/fake-vllm.js";
import { VirtualClock } from "../core/clock.js";
import type { Call, TraceSink } from "../core/types.js";
import { createGateway, type Gateway } from "./server.js";
import { closedPort } from "../testing/closed-port.js";

class MemorySink implements TraceSink {
  calls: Call[] = [];
  async recordCall(call: Call): Promise<void> {
    this.calls.push(structuredClone(call));
  }
}

function client(baseURL: string, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL, apiKey: "x", maxRetries: 0, defaultHeaders: headers });
}

/** The status and message of a rejected OpenAI call. */
async function failure(p: Promise<unknown>): Promise<{ status: number | undefined; message: string }> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  if (!(e instanceof OpenAI.APIError)) throw new Error(`expected an APIError, got ${String(e)}`);
  return { status: e.status, message: e.message };
}

const user = (content: string) => [{ role: "user" as const, content }];


/** In-flight calls per backend, as the gateway's router counts them. */
function loads(gw: Gateway): { name: string; inFlight: number }[] {
  return gw.router.views().map((v) => ({ name: v.name, inFlight: v.inFlight }));
}

describe("gateway in front of one vLLM-shaped upstream", () => {
  let fake: FakeVllm;
  let gw: Gateway;
  let url: string;
  const sink = new MemorySink();
  const clock = new VirtualClock(1000);

  beforeAll(async () => {
    fake = await startFakeVllm({ policyVersion: 3 });
    gw = createGateway({
      backends: [createBuiltinBackend({ name: "e0", url: fake.url })],
      sink,
      clock,
      maxPrograms: 16,
      callTimeoutMs: 5000,
    });
    url = await gw.listen("127.0.0.1", 0);
  });
  afterAll(async () => {
    await gw.close();
    await fake.close();
  });

  it("records the upstream's exact token ids and logprobs, and answers a plain OpenAI response", async () => {
    const messages = [
      { role: "system" as const, content: "be brief" },
      { role: "user" as const, content: "what is 2+2?" },
    ];
    const { data, response } = await client(`${url}/p/prog-1/v1`)
      .chat.completions.create({ model: "fake-model", messages, max_tokens: 8 })
      .withResponse();

    const upstream = fake.requests.at(-1);
    expect(upstream?.body).toEqual({ model: "fake-model", messages, max_tokens: 8, return_token_ids: true, logprobs: true });

    const promptIds = fakeTokenize(fakeChatPrompt(messages));
    const outIds = fakeTokenize(fakeReplyText(fakeChatPrompt(messages))).slice(0, 8);
    expect(sink.calls).toHaveLength(1);
    const call = sink.calls[0] as Call;
    expect(call).toEqual({
      id: response.headers.get("x-arbor-call-id"),
      programId: "prog-1",
      index: 0,
      messages,
      promptTokenIds: promptIds,
      outputTokenIds: outIds,
      logprobs: outIds.map((id, i) => fakeLogprob(id, i)),
      outputText: Buffer.from(outIds).toString("utf8"),
      finishReason: "length",
      backend: "e0",
      requestedModel: "fake-model",
      policyVersion: 3,
      timings: { start: 1000, end: 1000 },
    });
    // A time-ordered (version 7) UUID stamped by the gateway's clock (1000 ms).
    expect(call.id).toMatch(/^00000000-03e8-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(response.headers.get("x-arbor-call-index")).toBe("0");

    // The client did not ask for logprobs: it gets none, but keeps the token-id superset.
    const choice = data.choices[0] as unknown as Record<string, unknown>;
    expect(choice.logprobs).toBeNull();
    expect(choice.token_ids).toEqual(outIds);
    expect(data.choices[0]?.message.content).toBe(call.outputText);
    expect(data.choices[0]?.finish_reason).toBe("length");
  });

  it("returns logprobs to a client that asks, with its top_logprobs", async () => {
    const res = await client(`${url}/p/prog-lp/v1`).chat.completions.create({
      model: "fake-model",
      messages: user("hi"),
      max_tokens: 3,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(fake.requests.at(-1)?.body).toMatchObject({ logprobs: true, top_logprobs: 2, return_token_ids: true });
    const content = res.choices[0]?.logprobs?.content ?? [];
    expect(content.map((c) => c.logprob)).toEqual(sink.calls.at(-1)?.logprobs);
    expect(content.map((c) => c.top_logprobs.length)).toEqual([2, 2, 2]);
  });

  it("numbers calls per program and keeps the program table current", async () => {
    const p1 = client(`${url}/p/prog-idx/v1`);
    const p2 = client(`${url}/p/prog-idx-2/v1`);
    for (const text of ["a", "bb", "ccc"]) await p1.chat.completions.create({ model: "m", messages: user(text), max_tokens: 4 });
    await p2.chat.completions.create({ model: "m", messages: user("z"), max_tokens: 4 });
    const mine = (id: string) => sink.calls.filter((c) => c.programId === id).map((c) => c.index);
    expect(mine("prog-idx")).toEqual([0, 1, 2]);
    expect(mine("prog-idx-2")).toEqual([0]);
    const last = sink.calls.filter((c) => c.programId === "prog-idx").at(-1) as Call;
    const entry = await (await fetch(`${url}/programs/prog-idx`)).json();
    expect(entry).toMatchObject({
      id: "prog-idx",
      state: "active",
      calls: 3,
      inFlight: 0,
      phase: "acting",
      backend: "e0",
      contextTokens: last.promptTokenIds.length + last.outputTokenIds.length,
    });
  });

  it("serves completions with text and token-id prompts", async () => {
    const c = client(`${url}/p/prog-cmpl/v1`);
    const a = await c.completions.create({ model: "m", prompt: "abc", max_tokens: 5 });
    expect(fake.requests.at(-1)?.body).toEqual({ model: "m", prompt: "abc", max_tokens: 5, return_token_ids: true, logprobs: 0 });
    expect(a.choices[0]?.logprobs).toBeNull();
    const rec = sink.calls.at(-1) as Call;
    expect(rec).toMatchObject({ index: 0, messages: [{ role: "user", content: "abc" }], promptTokenIds: fakeTokenize("abc") });
    expect(rec.outputTokenIds).toEqual(fakeTokenize(fakeReplyText("abc")).slice(0, 5));
    expect(rec.logprobs).toEqual(rec.outputTokenIds.map((id, i) => fakeLogprob(id, i)));

    const b = await c.completions.create({ model: "m", prompt: [65, 66], max_tokens: 2, logprobs: 1 });
    expect(b.choices[0]?.logprobs?.token_logprobs).toEqual(sink.calls.at(-1)?.logprobs);
    expect(sink.calls.at(-1)).toMatchObject({ index: 1, messages: [], promptTokenIds: [65, 66] });
  });

  it("addresses programs by header or body field, and strips program_id upstream", async () => {
    await client(`${url}/v1`, { "x-arbor-program": "prog-h" }).chat.completions.create({ model: "m", messages: user("h"), max_tokens: 2 });
    expect(sink.calls.at(-1)).toMatchObject({ programId: "prog-h", index: 0 });
    const body = { model: "m", messages: user("b"), max_tokens: 2, program_id: "prog-b" };
    await client(`${url}/v1`).chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(sink.calls.at(-1)).toMatchObject({ programId: "prog-b", index: 0 });
    expect(fake.requests.at(-1)?.body).not.toHaveProperty("program_id");
  });

  it("rejects a call without a program id, conflicting ids; passes an upstream's refusal to stream (400)", async () => {
    const n = sink.calls.length;
    const missing = await failure(client(`${url}/v1`).chat.completions.create({ model: "m", messages: user("x") }));
    expect(missing.status).toBe(400);
    expect(missing.message).toContain("missing program id: call /p/<program-id>/v1/..., or send header 'x-arbor-program: <program-id>'");
    const conflict = await failure(
      client(`${url}/p/a/v1`, { "x-arbor-program": "b" }).chat.completions.create({ model: "m", messages: user("x") }),
    );
    expect(conflict).toMatchObject({ status: 400, message: expect.stringContaining("path says 'a' but header 'x-arbor-program' says 'b'") });
    const stream = await failure(client(`${url}/p/s/v1`).chat.completions.create({ model: "m", messages: user("x"), stream: true }));
    expect(stream).toMatchObject({ status: 400, message: expect.stringContaining("fake: stream not supported") });
    // A program whose only call failed is forgotten: it holds no table slot.
    expect(gw.table.get("s")).toBeUndefined();
    const bad = await fetch(`${url}/p/s/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
    expect(sink.calls.length).toBe(n);
  });

  it("releases a program; a later call gets 409", async () => {
    const c = client(`${url}/p/prog-r/v1`);
    await c.chat.completions.create({ model: "m", messages: user("x"), max_tokens: 2 });
    const rel = await fetch(`${url}/programs/prog-r/release`, { method: "POST" });
    expect(rel.status).toBe(200);
    expect(await rel.json()).toMatchObject({ id: "prog-r", state: "terminated", calls: 1, releasedAt: 1000 });
    const again = await failure(c.chat.completions.create({ model: "m", messages: user("y") }));
    expect(again).toMatchObject({ status: 409, message: expect.stringContaining("program 'prog-r' was released") });
    expect((await fetch(`${url}/programs/prog-r`)).status).toBe(200);
    expect((await fetch(`${url}/programs/nobody`)).status).toBe(404);
    expect((await fetch(`${url}/programs/nobody/release`, { method: "POST" })).status).toBe(404);
  });

  it("passes upstream errors through with their status and keeps the table consistent", async () => {
    const c = client(`${url}/p/prog-err/v1`);
    await c.chat.completions.create({ model: "m", messages: user("x"), max_tokens: 2 });
    const n = sink.calls.length;
    fake.failNext(429, "engine queue is full");
    const e = await c.chat.completions.create({ model: "m", messages: user("y") }).then(
      () => undefined,
      (x: unknown) => x as InstanceType<typeof OpenAI.APIError>,
    );
    expect(e).toMatchObject({ status: 429, message: expect.stringContaining("engine queue is full") });
    // The engine's 429, relayed, says when to come back.
    expect(e?.headers?.get("retry-after")).toBe("1");
    expect(sink.calls.length).toBe(n);
    expect(gw.table.get("prog-err")).toMatchObject({ calls: 1, inFlight: 0, phase: "acting" });
    await c.chat.completions.create({ model: "m", messages: user("z"), max_tokens: 2 });
    expect(sink.calls.at(-1)?.index).toBe(1); // the failed call's index is reused
  });

  it("answers 504 when the backend outlives the call timeout", async () => {
    fake.hold();
    try {
      const before = fake.requests.length;
      const p = failure(client(`${url}/p/prog-slow/v1`).chat.completions.create({ model: "m", messages: user("x") }));
      await fake.waitForRequests(before + 1);
      expect(gw.table.get("prog-slow")?.phase).toBe("reasoning");
      clock.advance(5000);
      expect(await p).toMatchObject({ status: 504, message: expect.stringContaining("backend 'e0' did not answer within 5000 ms") });
      expect(gw.table.get("prog-slow")).toBeUndefined();
      expect(loads(gw)).toEqual([{ name: "e0", inFlight: 0 }]);
    } finally {
      fake.releaseHeld();
    }
  });

  it("aborts the upstream call when the client goes away", async () => {
    fake.hold();
    try {
      const before = fake.requests.length;
      const ac = new AbortController();
      const p = client(`${url}/p/prog-gone/v1`).chat.completions.create({ model: "m", messages: user("x") }, { signal: ac.signal });
      await fake.waitForRequests(before + 1);
      ac.abort();
      await expect(p).rejects.toThrow();
      await vi.waitFor(() => expect(gw.table.get("prog-gone")).toBeUndefined());
      expect(loads(gw)).toEqual([{ name: "e0", inFlight: 0 }]);
    } finally {
      fake.releaseHeld();
    }
  });

  it("lists models, answers /health and passes checkBackends", async () => {
    const models = await client(`${url}/v1`).models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake-model"]);
    expect((await fetch(`${url}/health`)).status).toBe(200);
    await expect(gw.checkBackends()).resolves.toBeUndefined();
  });
});

describe("least-loaded routing over two upstreams", () => {
  let a: FakeVllm;
  let b: FakeVllm;
  let gw: Gateway;
  let url: string;
  const sink = new MemorySink();

  beforeAll(async () => {
    [a, b] = await Promise.all([startFakeVllm({ policyVersion: 1 }), startFakeVllm({ policyVersion: 1 })]);
    gw = createGateway({
      backends: [createBuiltinBackend({ name: "a", url: a.url }), createBuiltinBackend({ name: "b", url: b.url })],
      sink,
      maxPrograms: 8,
      callTimeoutMs: 30_000,
    });
    url = await gw.listen("127.0.0.1", 0);
  });
  afterAll(async () => {
    await gw.close();
    await Promise.all([a.close(), b.close()]);
  });

  it("spreads concurrent calls evenly", async () => {
    a.hold();
    b.hold();
    const calls = [0, 1, 2, 3].map((i) =>
      client(`${url}/p/prog-s${i}/v1`).chat.completions.create({ model: "m", messages: user(`q${i}`), max_tokens: 2 }),
    );
    await vi.waitFor(() => expect(a.requests.length + b.requests.length).toBe(4));
    expect([a.requests.length, b.requests.length]).toEqual([2, 2]);
    expect(loads(gw)).toEqual([
      { name: "a", inFlight: 2 },
      { name: "b", inFlight: 2 },
    ]);
    a.releaseHeld();
    b.releaseHeld();
    await Promise.all(calls);
    expect(sink.calls.map((c) => c.backend).sort()).toEqual(["a", "a", "b", "b"]);
    expect(loads(gw).map((l) => l.inFlight)).toEqual([0, 0]);
  });
});

describe("prefix-affinity routing over two upstreams", () => {
  it("sends a program's later calls where its context is cached, and other programs elsewhere when it balances", async () => {
    const [a, b] = await Promise.all([startFakeVllm({ policyVersion: 1 }), startFakeVllm({ policyVersion: 1 })]);
    const sink = new MemorySink();
    const gw = createGateway({
      backends: [createBuiltinBackend({ name: "a", url: a.url }), createBuiltinBackend({ name: "b", url: b.url })],
      sink,
      routing: "prefix-affinity",
    });
    const url = await gw.listen("127.0.0.1", 0);
    try {
      const ask = (program: string, q: string) =>
        client(`${url}/p/${program}/v1`).chat.completions.create({ model: "m", messages: user(q), max_tokens: 4 });
      for (const q of ["first", "second", "third"]) await ask("prog-x", q);
      const xs = sink.calls.filter((c) => c.programId === "prog-x").map((c) => c.backend);
      // The first call goes to the smallest (empty) tree; the history it leaves there pulls the rest.
      expect(new Set(xs).size).toBe(1);
      await ask("prog-y", "other");
      const y = sink.calls.find((c) => c.programId === "prog-y")!.backend;
      expect(y).not.toBe(xs[0]);
    } finally {
      await gw.close();
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("rejects an unknown routing preset naming the known ones", () => {
    expect(() => createGateway({ backends: [createBuiltinBackend({ name: "a", url: "http://127.0.0.1:9/v1" })], sink: new MemorySink(), routing: "random" })).toThrow(
      /gateway\.routing: unknown preset 'random' \(known: least-load, kv-usage, sticky-program, prefix-affinity, cost-aware/,
    );
  });
});

describe("gateway failure paths", () => {
  it("answers 502 naming an unreachable backend; checkBackends gives one line", async () => {
    const port = await closedPort();
    const gw = createGateway({ backends: [createBuiltinBackend({ name: "engine-0", url: `http://127.0.0.1:${port}/v1` })], sink: new MemorySink() });
    const url = await gw.listen("127.0.0.1", 0);
    try {
      const e = await failure(client(`${url}/p/prog-d/v1`).chat.completions.create({ model: "m", messages: user("x") }));
      expect(e.status).toBe(502);
      expect(e.message).toContain(`backend 'engine-0' at http://127.0.0.1:${port}/v1 is not reachable: connect ECONNREFUSED`);
      expect(gw.table.get("prog-d")).toBeUndefined();
      const err = await gw.checkBackends().then(
        () => undefined,
        (x: unknown) => x as Error,
      );
      expect(err?.name).toBe("ArborError");
      expect(err?.message).toMatch(new RegExp(`^backend 'engine-0' at http://127\\.0\\.0\\.1:${port}/v1 is not reachable: connect ECONNREFUSED[^\\n]*$`));
    } finally {
      await gw.close();
    }
  });

  function cannedBackend(json: unknown): Backend {
    const reply = async (): Promise<BackendReply> => ({ status: 200, json: structuredClone(json) });
    return { name: "canned", url: "http://canned/v1", chatCompletions: reply, completions: reply, models: async () => ({}), health: async () => {} };
  }
  const good = {
    prompt_token_ids: [1],
    policy_version: 0,
    choices: [{ index: 0, message: { role: "assistant", content: "k" }, finish_reason: "stop", token_ids: [2], logprobs: { content: [{ logprob: -1 }] } }],
  };
  const post = (gw: Gateway, program: string) =>
    gw.app.inject({ method: "POST", url: `/p/${program}/v1/chat/completions`, payload: { model: "m", messages: user("x") } });

  it("refuses (502) an upstream answer without token ids instead of recording a partial trace", async () => {
    const sink = new MemorySink();
    const noIds = { ...good, choices: [{ ...good.choices[0], token_ids: undefined }] };
    const gw = createGateway({ backends: [cannedBackend(noIds)], sink });
    const r = await post(gw, "p");
    expect(r.statusCode).toBe(502);
    expect(r.json().error.message).toContain("backend 'canned' at http://canned/v1 returned no choices[0].token_ids");
    expect(sink.calls).toEqual([]);
    await gw.close();
  });

  it("answers while the trace is written; a program whose call could not be recorded gets 500 on its next call, before the backend", async () => {
    let writes = 0;
    const failing: TraceSink = {
      recordCall: async () => {
        writes++;
        throw new Error("disk full");
      },
    };
    let upstream = 0;
    const counted = cannedBackend(good);
    const reply = counted.chatCompletions;
    counted.chatCompletions = (...args) => {
      upstream++;
      return reply(...args);
    };
    const gw = createGateway({ backends: [counted], sink: failing, maxPrograms: 1 });
    const first = await post(gw, "p");
    expect(first.statusCode).toBe(200);
    await gw.table.drain();
    expect(writes).toBe(1);
    const r = await post(gw, "p");
    expect(r.statusCode).toBe(500);
    expect(r.json().error).toMatchObject({ code: "record_failed", message: "program 'p': call 0 (disk full) was not recorded, so it accepts no more calls" });
    expect(upstream).toBe(1);
    const full = await post(gw, "q");
    expect(full.statusCode).toBe(429);
    expect(full.headers["retry-after"]).toBe("1");
    expect(full.json().error).toEqual({ message: "program table is full (limit 1)", type: "requests", param: null, code: "capacity" });
    await gw.close();
  });
});
