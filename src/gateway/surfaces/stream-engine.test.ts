// Streaming /v1/messages and /v1/responses in front of the real built-in engine (tiny policy on
// llama.cpp), driven by the official SDKs: the streamed text adds up to the one recorded call.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../../core/types.js";
import { startRealEngineGateway, type RealEngineGateway } from "../../testing/real-engine-fixture.js";

let fx: RealEngineGateway;
let calls: Call[];
let url: string;

beforeAll(async () => {
  fx = await startRealEngineGateway(5);
  ({ calls, url } = fx);
});

afterAll(async () => {
  await fx?.close();
});

const callsOf = (programId: string): Call[] => calls.filter((c) => c.programId === programId);

describe("streamed /v1/messages + real engine", () => {
  it("messages.stream(): text events add up to the recorded call; one call recorded", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/msg-s`, apiKey: "unused", maxRetries: 0 });
    const stream = client.messages.stream({ model: "arbor-tiny", max_tokens: 12, system: "Be terse.", messages: [{ role: "user", content: "What is 2+3?" }] });
    let text = "";
    stream.on("text", (t) => (text += t));
    const msg = await stream.finalMessage();
    const recorded = callsOf("msg-s");
    expect(recorded).toHaveLength(1);
    const call = recorded[0] as Call;
    expect(call.outputText).not.toBe("");
    expect(text).toBe(call.outputText);
    expect(msg.content).toEqual([expect.objectContaining({ type: "text", text: call.outputText })]);
    expect(msg.model).toBe("arbor-tiny");
    expect(msg.stop_reason).toBe(call.finishReason === "length" ? "max_tokens" : "end_turn");
    expect(msg.usage).toMatchObject({ input_tokens: call.promptTokenIds.length, output_tokens: call.outputTokenIds.length });
    expect(call.policyVersion).toBe(5);
    expect(call.messages).toEqual([
      { role: "system", content: "Be terse." },
      { role: "user", content: "What is 2+3?" },
    ]);
  });

  it("messages.create({stream: true}) yields Anthropic's event order", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/msg-c`, apiKey: "unused", maxRetries: 0 });
    const events = await client.messages.create({ model: "arbor-tiny", max_tokens: 8, messages: [{ role: "user", content: "Hi" }], stream: true });
    const types: string[] = [];
    for await (const e of events) types.push(e.type);
    expect(types.slice(0, 2)).toEqual(["message_start", "content_block_start"]);
    expect(types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
    expect(types.filter((t) => t === "content_block_delta").length).toBeGreaterThan(0);
    expect(callsOf("msg-c")).toHaveLength(1);
  });

  it("answers a request the engine refuses with Anthropic's error shape, recording nothing", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/msg-e`, apiKey: "unused", maxRetries: 0 });
    const err = await client.messages
      .create({ model: "arbor-tiny", max_tokens: 100_000, messages: [{ role: "user", content: "Hi" }], stream: true })
      .then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringMatching(/context/) } });
    expect(callsOf("msg-e")).toHaveLength(0);
  });
});

describe("streamed /v1/responses + real engine", () => {
  it("responses.stream(): deltas add up to the recorded call; final response matches", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/resp-s/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = client.responses.stream({ model: "arbor-tiny", input: "What is 2+3?", instructions: "Be terse.", max_output_tokens: 12 });
    let text = "";
    stream.on("response.output_text.delta", (e) => (text += e.delta));
    let terminal: OpenAI.Responses.Response | undefined;
    stream.on("event", (e) => {
      if (e.type === "response.completed" || e.type === "response.incomplete") terminal = e.response;
    });
    await stream.finalResponse();
    // The SDK's snapshot takes the final response from response.completed only; read the terminal event.
    const res = terminal as OpenAI.Responses.Response;
    const recorded = callsOf("resp-s");
    expect(recorded).toHaveLength(1);
    const call = recorded[0] as Call;
    expect(text).toBe(call.outputText);
    const items = res.output.flatMap((o) => (o.type === "message" ? o.content : []));
    expect(items).toEqual([expect.objectContaining({ type: "output_text", text: call.outputText })]);
    expect(res.id).toMatch(/^resp_/);
    expect(res.usage).toMatchObject({ input_tokens: call.promptTokenIds.length, output_tokens: call.outputTokenIds.length });
    expect(res.status).toBe(call.finishReason === "length" ? "incomplete" : "completed");
    expect(res.instructions).toBe("Be terse.");
  });

  it("responses.create({stream: true}) numbers events and ends with the terminal event", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/resp-c/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await client.responses.create({ model: "arbor-tiny", input: "Hi", max_output_tokens: 8, stream: true });
    const events = [];
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.slice(0, 4).map((e) => e.type)).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
    const last = events.at(-1);
    expect(["response.completed", "response.incomplete"]).toContain(last?.type);
    expect(callsOf("resp-c")).toHaveLength(1);
  });
});
