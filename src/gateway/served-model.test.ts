// The engine serves a configurable model name, and the gateway maps any model name a client sends
// (black-box agents name their own models) to its program's backends: the call is sent with the
// backend's served name, served, and recorded with it, on the passthrough (plain and streamed,
// OpenAI and Anthropic surfaces) and on the token path. Real engine, official clients.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../backends/builtin.js";
import { createBackend } from "../backends/registry.js";
import { createArborBackend, createVllmBackend } from "../backends/vllm.js";
import { RunConfigSchema, servedModelOf } from "../core/config.js";
import type { Call } from "../core/types.js";
import { startTinyEngine, type TinyEngine } from "../testing/real-engine-fixture.js";
import { createGateway, type Gateway } from "./server.js";

const SERVED = "calc-policy";
let tiny: TinyEngine;
const gateways: Gateway[] = [];
const calls: Call[] = [];

async function gatewayFor(backend: Parameters<typeof createGateway>[0]["backends"][number]): Promise<string> {
  const g = createGateway({ backends: [backend], sink: { recordCall: async (c) => void calls.push(c) } });
  gateways.push(g);
  return g.listen("127.0.0.1", 0);
}

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-served-", { servedModelName: SERVED });
});

afterAll(async () => {
  for (const g of gateways) await g.close();
  await tiny?.close();
});

describe("served model name", () => {
  it("the engine serves its configured name and only that", async () => {
    const client = new OpenAI({ baseURL: `${tiny.engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
    expect((await client.models.list()).data.map((m) => m.id)).toEqual([SERVED]);
    const r = await client.chat.completions.create({ model: SERVED, messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
    expect(r.model).toBe(SERVED);
    await expect(client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 3 })).rejects.toMatchObject({ status: 404 });
  });

  it("passthrough: any client model name is served by the program's backend and recorded with the served name", async () => {
    const url = await gatewayFor(createBuiltinBackend({ name: "e0", url: `${tiny.engine.url}/v1`, model: SERVED }));
    const client = new OpenAI({ baseURL: `${url}/p/agent-1/v1`, apiKey: "unused", maxRetries: 0 });
    const r = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 3, seed: 1 });
    expect(r.choices[0]!.message.role).toBe("assistant");
    const stream = await client.chat.completions.create({ model: "some-agent-model", messages: [{ role: "user", content: "hi" }], max_tokens: 3, stream: true });
    for await (const chunk of stream) void chunk;
    const anthropic = new Anthropic({ baseURL: `${url}/p/agent-1`, apiKey: "unused", maxRetries: 0 });
    await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
    const events = await anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 3, messages: [{ role: "user", content: "hi" }], stream: true });
    for await (const e of events) void e;
    await client.responses.create({ model: "gpt-5", input: "hi", max_output_tokens: 3 });
    const responseEvents = await client.responses.create({ model: "gpt-5-mini", input: "hi", max_output_tokens: 3, stream: true });
    for await (const e of responseEvents) void e;
    const mine = calls.filter((c) => c.programId === "agent-1");
    // Each call keeps the name its client asked for beside the one it was served as.
    expect(mine.map((c) => c.requestedModel)).toEqual(["gpt-4o-mini", "some-agent-model", "claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", "gpt-5-mini"]);
    for (const c of mine) {
      expect(c.servedModel).toBe(SERVED);
      expect(c.backend).toBe("e0");
    }
  });

  it("token path: the same, with the backend's name on its generate requests", async () => {
    const url = await gatewayFor(createArborBackend({ name: "t0", url: `${tiny.engine.url}/v1`, model: SERVED }));
    const client = new OpenAI({ baseURL: `${url}/p/agent-2/v1`, apiKey: "unused", maxRetries: 0 });
    await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 3, seed: 1 });
    await client.completions.create({ model: "davinci", prompt: "1+1=", max_tokens: 3 });
    const mine = calls.filter((c) => c.programId === "agent-2");
    expect(mine.map((c) => c.requestedModel)).toEqual(["gpt-4o-mini", "davinci"]);
    for (const c of mine) {
      expect(c.servedModel).toBe(SERVED);
      expect(c.outputTokenIds.length).toBeGreaterThan(0);
    }
  });

  it("run config: engines[].servedModelName (default arbor-tiny) names the backends of in-process engines", () => {
    const base = { name: "t", env: { name: "calc" } };
    const dflt = RunConfigSchema.parse({ ...base, engines: [{ name: "e0" }] });
    expect(dflt.engines[0]!.servedModelName).toBe("arbor-tiny");
    expect(servedModelOf(dflt)).toBe("arbor-tiny");
    const named = RunConfigSchema.parse({ ...base, engines: [{ name: "e0", servedModelName: SERVED }] });
    expect(servedModelOf(named)).toBe(SERVED);
    expect(createBackend({ name: "e0", type: "builtin" }, { url: "http://127.0.0.1:1/v1", model: SERVED }).servedModel).toBe(SERVED);
    // An external backend's own `model` wins.
    const ext = RunConfigSchema.parse({ ...base, backends: [{ name: "v", type: "vllm", url: "http://127.0.0.1:1/v1", model: "Qwen/Qwen3-8B" }] });
    expect(servedModelOf(ext)).toBe("Qwen/Qwen3-8B");
    expect(createBackend(ext.backends[0]!, { model: "ignored" }).servedModel).toBe("Qwen/Qwen3-8B");
    expect(() => RunConfigSchema.parse({ ...base, engines: [{ name: "e0", servedModelName: "" }] })).toThrow(/servedModelName/);
  });
});

describe("served model discovery", () => {
  it("a vLLM-protocol backend without a configured name maps an unknown client name to the engine's served one", async () => {
    // Passthrough (token path off): the body goes to the engine with the name it serves.
    const g = createGateway({ backends: [createVllmBackend({ name: "d0", url: `${tiny.engine.url}/v1` })], tokenPath: false, sink: { recordCall: async (c) => void calls.push(c) } });
    gateways.push(g);
    const url = await g.listen("127.0.0.1", 0);
    const client = new OpenAI({ baseURL: `${url}/p/agent-3/v1`, apiKey: "unused", maxRetries: 0 });
    const r = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
    expect(r.model).toBe(SERVED);
    // A served name is kept as the client sent it; streamed calls are mapped alike.
    const stream = await client.completions.create({ model: "davinci-002", prompt: "1+1=", max_tokens: 2, stream: true });
    for await (const chunk of stream) expect(chunk.model).toBe(SERVED);
    await client.completions.create({ model: SERVED, prompt: "1+1=", max_tokens: 2 });
    expect(calls.filter((c) => c.programId === "agent-3")).toHaveLength(3);
  });
});
