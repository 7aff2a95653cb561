// Anthropic's count_tokens through the real @anthropic-ai/sdk against a gateway and a real engine: the count is the
// prompt a program's first call of the same request is given, tools and system included; nothing is generated or
// recorded; fields a count request does not take are refused as Anthropic refuses them; a program's key is needed
// where keys are required.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../../backends/builtin.js";
import { createArborBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import { startFixtureServer } from "../../testing/fixture-server.js";
import { startTinyEngine, type TinyEngine } from "../../testing/real-engine-fixture.js";
import { createGateway, type Gateway } from "../server.js";

const ADMIN = "admin-token-for-count-tokens";
let tiny: TinyEngine;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-count-tokens-");
  gateway = createGateway({
    backends: [createArborBackend({ name: "t0", url: `${tiny.engine.url}/v1` })],
    sink: { recordCall: async (c) => void calls.push(c) },
    auth: { adminToken: ADMIN, requireProgramKeys: true },
  });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await tiny?.close();
});

/** A program created at the gateway, and an Anthropic client calling as it. */
async function program(): Promise<{ id: string; client: Anthropic }> {
  const res = await fetch(`${url}/programs`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN}` }, body: "{}" });
  const { id, api_key } = (await res.json()) as { id: string; api_key: string };
  return { id, client: new Anthropic({ baseURL: `${url}/p/${id}`, apiKey: api_key, maxRetries: 0 }) };
}

const request = {
  model: "claude-sonnet-4-5",
  system: [{ type: "text" as const, text: "You solve arithmetic.", cache_control: { type: "ephemeral" as const } }],
  tools: [{ name: "calc", description: "Evaluate an expression", input_schema: { type: "object" as const, properties: { expr: { type: "string" } } } }],
  messages: [{ role: "user" as const, content: "What is 12 * 7?" }],
};

describe("POST /v1/messages/count_tokens", () => {
  it("counts the prompt a program's first call of the request is given, generating and recording nothing", async () => {
    const { id, client } = await program();
    const counted = await client.messages.countTokens(request);
    expect(calls.filter((c) => c.programId === id)).toHaveLength(0);
    const msg = await client.messages.create({ ...request, max_tokens: 4 });
    const [call] = calls.filter((c) => c.programId === id);
    expect(counted.input_tokens).toBe(call!.promptTokenIds.length);
    expect(msg.usage.input_tokens).toBe(counted.input_tokens);
    // The system prompt and the tools are counted: without them, fewer tokens.
    const bare = await client.messages.countTokens({ model: request.model, messages: request.messages });
    expect(bare.input_tokens).toBeGreaterThan(0);
    expect(bare.input_tokens).toBeLessThan(counted.input_tokens);
  });

  it("refuses a field a count request does not take, and a bad message, in Anthropic's error shape", async () => {
    const { client } = await program();
    const extra = client.messages.countTokens({ ...request, max_tokens: 8 } as Parameters<typeof client.messages.countTokens>[0]);
    await expect(extra).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    await expect(extra).rejects.toThrow(/max_tokens: Extra inputs are not permitted/);
    const empty = client.messages.countTokens({ model: request.model, messages: [] });
    await expect(empty).rejects.toThrow(/messages: at least one message is required/);
  });

  it("takes the program from body field program_id, as the no-program 400 advises, on Messages and count_tokens", async () => {
    const { id, client } = await program();
    const key = client.apiKey as string;
    const send = (path: string, body: object) =>
      fetch(`${url}/v1/messages${path}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": key }, body: JSON.stringify(body) });
    const nameless = await send("", { ...request, max_tokens: 4 });
    expect(nameless.status).toBe(400);
    expect(((await nameless.json()) as { error: { message: string } }).error.message).toMatch(/or body field program_id/);

    const created = await send("", { ...request, max_tokens: 4, program_id: id });
    expect(created.status).toBe(200);
    expect(calls.filter((c) => c.programId === id)).toHaveLength(1);
    const counted = await send("/count_tokens", { ...request, program_id: id });
    expect(counted.status).toBe(200);
    expect(((await counted.json()) as { input_tokens: number }).input_tokens).toBe(calls.find((c) => c.programId === id)!.promptTokenIds.length);
    // It must agree with the path, as on chat.
    const clash = await fetch(`${url}/p/${id}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: JSON.stringify({ ...request, program_id: "another" }),
    });
    expect(clash.status).toBe(400);
  });

  it("needs the program's key where keys are required", async () => {
    const { id } = await program();
    const stranger = new Anthropic({ baseURL: `${url}/p/${id}`, apiKey: "arbor-pk-not-this-one", maxRetries: 0 });
    await expect(stranger.messages.countTokens(request)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
  });
});

describe("POST /v1/messages/count_tokens on an engine that does not answer", () => {
  it("gives up after the call timeout with 504, naming the backend", async () => {
    const silent = await startFixtureServer(() => ({ json: {} }));
    silent.hold();
    const g = createGateway({ backends: [createArborBackend({ name: "stuck", url: `${silent.root}/v1`, model: "m" })], sink: { recordCall: async () => {} }, callTimeoutMs: 300 });
    const base = await g.listen("127.0.0.1", 0);
    try {
      const client = new Anthropic({ baseURL: `${base}/p/any`, apiKey: "unused", maxRetries: 0 });
      const e = (await client.messages.countTokens(request).catch((x: unknown) => x)) as { status?: number; message?: string };
      expect(e.status).toBe(504);
      expect(e.message).toMatch(/backend 'stuck' did not answer within 300 ms/);
      expect(silent.requests.map((r) => r.path)).toEqual(["/tokenize"]);
    } finally {
      await g.close();
      await silent.close();
    }
  });

  it("drops the engine's tokenize when the client goes away, long before the call timeout", async () => {
    // An engine that never answers and says when the gateway hung up on it.
    let arrived!: () => void;
    let hungUp!: (path: string) => void;
    const reached = new Promise<void>((r) => (arrived = r));
    const dropped = new Promise<string>((r) => (hungUp = r));
    const silent = createServer((req: IncomingMessage) => {
      arrived();
      req.socket.once("close", () => hungUp(req.url ?? ""));
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const root = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const g = createGateway({ backends: [createArborBackend({ name: "stuck", url: `${root}/v1`, model: "m" })], sink: { recordCall: async () => {} }, callTimeoutMs: 600_000 });
    const base = await g.listen("127.0.0.1", 0);
    try {
      const client = new Anthropic({ baseURL: `${base}/p/any`, apiKey: "unused", maxRetries: 0 });
      const ac = new AbortController();
      const counting = client.messages.countTokens(request, { signal: ac.signal });
      await reached;
      ac.abort();
      await expect(counting).rejects.toThrow();
      expect(await dropped).toBe("/tokenize");
    } finally {
      await g.close();
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
  });
});

describe("POST /v1/messages/count_tokens without a tokenizer", () => {
  it("answers 501 in Anthropic's shape, naming what it needs", async () => {
    // A plain OpenAI-compatible backend (no /tokenize adapter): nothing is called.
    const g = createGateway({ backends: [createBuiltinBackend({ name: "plain", url: "http://127.0.0.1:9/v1" })], sink: { recordCall: async () => {} } });
    const base = await g.listen("127.0.0.1", 0);
    try {
      const client = new Anthropic({ baseURL: `${base}/p/any`, apiKey: "unused", maxRetries: 0 });
      const e = (await client.messages.countTokens(request).catch((x: unknown) => x)) as { status?: number; message?: string };
      expect(e.status).toBe(501);
      expect(e.message).toMatch(/count_tokens needs a backend with the engine's tokenizer \(type builtin, vllm or llamacpp/);
    } finally {
      await g.close();
    }
  });
});
