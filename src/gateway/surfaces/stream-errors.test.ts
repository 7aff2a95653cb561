// Streams that fail after they began, on every surface: the client gets the failure in its own
// API's error event (so its SDK raises), and the gateway records nothing and keeps its table right.
import Anthropic from "@anthropic-ai/sdk";
import { createServer, type Server } from "node:http";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Backend } from "../../backends/backend.js";
import { createBuiltinBackend } from "../../backends/builtin.js";
import type { Call } from "../../core/types.js";
import { createGateway, type Gateway } from "../server.js";

const chunk = (extra: object): string => `data: ${JSON.stringify({ id: "chatcmpl-f", object: "chat.completion.chunk", policy_version: 1, ...extra })}\n\n`;
const tokenChunk = (content: string | null, toolCalls?: object[]): string =>
  chunk({ choices: [{ index: 0, delta: { content, ...(toolCalls ? { tool_calls: toolCalls } : {}) }, logprobs: { content: [{ token: "x", logprob: -1 }] }, finish_reason: null, token_ids: [5] }] });

/** An engine double whose answer depends on the user's message: fails, is cut, or interleaves tool calls. */
let upstream: Server;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const mode = String((JSON.parse(body) as { messages: { content: string }[] }).messages.at(-1)?.content);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ prompt_token_ids: [1, 2], choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] }));
      res.write(tokenChunk("Hi"));
      if (mode === "fail") {
        res.end(`data: ${JSON.stringify({ error: { message: "engine exploded", type: "server_error", code: 500 } })}\n\ndata: [DONE]\n\n`);
      } else if (mode === "cut") {
        setImmediate(() => res.destroy());
      } else {
        res.write(tokenChunk(null, [{ index: 0, id: "a", function: { name: "t", arguments: "{" } }]));
        res.write(tokenChunk(null, [{ index: 1, id: "b", function: { name: "t", arguments: "{}" } }]));
        res.write(tokenChunk(null, [{ index: 0, function: { arguments: "}" } }]));
        res.end(`${chunk({ choices: [{ index: 0, delta: {}, logprobs: { content: [] }, finish_reason: "tool_calls", token_ids: [] }] })}data: [DONE]\n\n`);
      }
    });
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const port = (upstream.address() as { port: number }).port;
  gateway = createGateway({ backends: [createBuiltinBackend({ name: "double", url: `http://127.0.0.1:${port}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  upstream?.closeAllConnections();
  await new Promise<void>((r) => upstream.close(() => r()));
});

const modes = ["fail", "cut", "interleaved"] as const;

describe("a stream failing after it began", () => {
  it.each(modes)("/v1/messages (%s): Anthropic error event, the SDK raises, nothing recorded", async (mode) => {
    const programId = `msg-${mode}`;
    const client = new Anthropic({ baseURL: `${url}/p/${programId}`, apiKey: "unused", maxRetries: 0 });
    const stream = client.messages.stream({ model: "m", max_tokens: 10, messages: [{ role: "user", content: mode }] });
    let text = "";
    stream.on("text", (t) => (text += t));
    const err = await stream.finalMessage().then(() => undefined, (e: unknown) => e);
    expect(text).toBe("Hi");
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(String(err)).toMatch(mode === "fail" ? /engine exploded/ : mode === "cut" ? /backend 'double'/ : /continued after/);
    expect(calls).toEqual([]);
    // Its only call failed: the program holds no table slot.
    expect(gateway.table.get(programId)).toBeUndefined();
  });

  it.each(modes)("/v1/responses (%s): error event, the SDK raises, nothing recorded", async (mode) => {
    const programId = `resp-${mode}`;
    const client = new OpenAI({ baseURL: `${url}/p/${programId}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = client.responses.stream({ model: "m", input: mode });
    let text = "";
    stream.on("response.output_text.delta", (e) => (text += e.delta));
    const err = await stream.finalResponse().then(() => undefined, (e: unknown) => e);
    expect(text).toBe("Hi");
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err)).toMatch(mode === "fail" ? /engine exploded/ : mode === "cut" ? /backend 'double'/ : /continued after/);
    expect(calls).toEqual([]);
    // Its only call failed: the program holds no table slot.
    expect(gateway.table.get(programId)).toBeUndefined();
  });

  it("chat: the engine's own error event is passed on as is", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/chat-fail/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "fail" }], stream: true });
    const err = await (async () => {
      for await (const _ of stream) void _;
    })().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String(err)).toMatch(/engine exploded/);
    expect(calls).toEqual([]);
  });
});

describe("a stream failing before it began", () => {
  it("answers an unreachable engine in each surface's error shape", async () => {
    // Port 9 (discard) is closed on test machines: the connection is refused at once.
    const gw = createGateway({ backends: [createBuiltinBackend({ name: "down", url: "http://127.0.0.1:9/v1" })], sink: { recordCall: async (c) => void calls.push(c) } });
    try {
      const base = await gw.listen("127.0.0.1", 0);
      const anthropic = new Anthropic({ baseURL: `${base}/p/down-m`, apiKey: "unused", maxRetries: 0 });
      const aErr = await anthropic.messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }], stream: true }).then(() => undefined, (e: unknown) => e);
      expect(aErr).toBeInstanceOf(Anthropic.APIError);
      expect((aErr as InstanceType<typeof Anthropic.APIError>).status).toBe(502);
      expect((aErr as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: "error", error: { type: "api_error", message: expect.stringMatching(/backend 'down'/) } });
      const openai = new OpenAI({ baseURL: `${base}/p/down-r/v1`, apiKey: "unused", maxRetries: 0 });
      const rErr = await openai.responses.create({ model: "m", input: "x", stream: true }).then(() => undefined, (e: unknown) => e);
      expect(rErr).toMatchObject({ status: 502, type: "server_error", code: "backend_unreachable" });
      expect(calls).toEqual([]);
      expect(gw.table.get("down-m")).toBeUndefined();
    } finally {
      await gw.close();
    }
  });

  it("refuses stream: true on a backend that cannot stream, in the surface's shape", async () => {
    const plain: Backend = {
      name: "plain",
      url: "http://plain/v1",
      chatCompletions: async () => ({ status: 500, json: {} }),
      completions: async () => ({ status: 500, json: {} }),
      models: async () => ({ data: [] }),
      health: async () => undefined,
    };
    const gw = createGateway({ backends: [plain], sink: { recordCall: async (c) => void calls.push(c) } });
    try {
      const res = await gw.app.inject({ method: "POST", url: "/p/plain-m/v1/messages", payload: { model: "m", max_tokens: 5, stream: true, messages: [{ role: "user", content: "x" }] } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ type: "error", error: { type: "invalid_request_error", message: "stream: backend 'plain' cannot stream; send stream: false" } });
      expect(gw.table.get("plain-m")).toBeUndefined();
    } finally {
      await gw.close();
    }
  });
});
