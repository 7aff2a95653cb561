// Streaming through the gateway to the real built-in engine with the official `openai` client: the
// streamed answer and its recorded trace equal a non-streamed call's, and a broken stream records nothing.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { createBuiltinBackend } from "../backends/builtin.js";
import { abortMidStream, refusedBeforeStream, startRealEngineGateway, traceOf, type RealEngineGateway } from "../testing/real-engine-fixture.js";
import { createGateway } from "./server.js";

let fx: RealEngineGateway;
let calls: Call[];
let gateway: RealEngineGateway["gateway"];
let url: string;

beforeAll(async () => {
  fx = await startRealEngineGateway(3);
  ({ calls, gateway, url } = fx);
});

afterAll(async () => {
  await fx?.close();
});

const client = (program: string): OpenAI => new OpenAI({ baseURL: `${url}/p/${program}/v1`, apiKey: "unused", maxRetries: 0 });

describe("streaming through the gateway to the real engine", () => {
  it("chat: streamed content and recorded trace equal a non-streamed call's; usage passes through", async () => {
    const req = { model: "arbor-tiny", messages: [{ role: "user" as const, content: "Count to five." }], max_tokens: 24, temperature: 1, seed: 11 };
    const plain = await client("plain").chat.completions.create(req);
    const plainCall = calls.at(-1)!;

    const stream = await client("streamed").chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let content = "";
    const finishes: (string | null)[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice) {
        content += choice.delta.content ?? "";
        finishes.push(choice.finish_reason);
        // Not asked for: logprobs and token ids are hidden from the client.
        expect(choice.logprobs ?? null).toBeNull();
        expect((choice as unknown as { token_ids?: unknown }).token_ids).toBeUndefined();
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(content).toBe(plain.choices[0]!.message.content);
    expect(finishes.at(-1)).toBe(plain.choices[0]!.finish_reason);
    expect(usage).toEqual(plain.usage);

    const call = calls.at(-1)!;
    expect(call).toMatchObject({ programId: "streamed", index: 0, backend: "e0", policyVersion: 3 });
    expect(call.outputTokenIds.length).toBeGreaterThan(0);
    expect(traceOf(call)).toEqual(traceOf(plainCall));
    expect(gateway.table.get("streamed")).toMatchObject({ calls: 1, inFlight: 0 });
  });

  it("completions: streamed text and trace equal a non-streamed call's; asked-for logprobs and token ids pass through", async () => {
    const req = { model: "arbor-tiny", prompt: "1+1=", max_tokens: 12, temperature: 1, seed: 5, logprobs: 1 };
    const plain = await client("c-plain").completions.create(req);
    const plainCall = calls.at(-1)!;
    const stream = await client("c-streamed").completions.create({ ...req, stream: true, return_token_ids: true } as OpenAI.CompletionCreateParamsStreaming);
    let text = "";
    const ids: number[] = [];
    const lps: number[] = [];
    for await (const chunk of stream) {
      const choice = chunk.choices[0]!;
      text += choice.text;
      ids.push(...((choice as unknown as { token_ids?: number[] }).token_ids ?? []));
      lps.push(...(choice.logprobs?.token_logprobs ?? []));
    }
    expect(text).toBe(plain.choices[0]!.text);
    const call = calls.at(-1)!;
    expect(call.programId).toBe("c-streamed");
    expect(traceOf(call)).toEqual(traceOf(plainCall));
    expect(ids).toEqual(call.outputTokenIds);
    expect(lps).toEqual(call.logprobs);
  });

  it("a client abort mid-stream records nothing, frees the program and aborts the engine", async () => {
    await abortMidStream(fx, client("gone"), "gone");
  });

  it("an upstream error before the stream starts reaches the client with its OpenAI status", async () => {
    await refusedBeforeStream(fx, client("refused"), "refused");
  });
});

describe("an upstream stream cut short", () => {
  it("records nothing, keeps the table consistent and sends the client an error event", async () => {
    const { createServer } = await import("node:http");
    const chunk = (extra: object): string => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", policy_version: 1, ...extra })}\n\n`;
    const upstream = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ prompt_token_ids: [1], choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] }));
      res.write(chunk({ choices: [{ index: 0, delta: { content: "hi" }, logprobs: { content: [{ token: "hi", logprob: -1 }] }, finish_reason: null, token_ids: [5] }] }));
      setImmediate(() => res.destroy());
    });
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
    const port = (upstream.address() as { port: number }).port;
    const sink: Call[] = [];
    const gw = createGateway({ backends: [createBuiltinBackend({ name: "cut", url: `http://127.0.0.1:${port}/v1` })], sink: { recordCall: async (c) => void sink.push(c) } });
    try {
      const base = await gw.listen("127.0.0.1", 0);
      const c = new OpenAI({ baseURL: `${base}/p/cut/v1`, apiKey: "unused", maxRetries: 0 });
      const stream = await c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], stream: true });
      let content = "";
      const err = await (async () => {
        for await (const ch of stream) content += ch.choices[0]?.delta.content ?? "";
      })().then(() => undefined, (e: unknown) => e);
      expect(content).toBe("hi");
      expect(String(err)).toContain("backend 'cut'");
      expect(sink).toEqual([]);
      expect(gw.table.get("cut")).toBeUndefined();
    } finally {
      await gw.close();
      upstream.closeAllConnections();
      await new Promise<void>((r) => upstream.close(() => r()));
    }
  });
});
