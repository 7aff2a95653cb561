// /v1/responses in front of the real built-in engine (tiny policy on llama.cpp), driven by the official
// `openai` client and by the OpenAI Agents SDK with only its base URL changed; each call is recorded token-in/token-out.
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Call } from "../../core/types.js";
import { startRealEngineGateway, type RealEngineGateway } from "../../testing/real-engine-fixture.js";

let fx: RealEngineGateway;
let calls: Call[];
let url: string;

beforeAll(async () => {
  fx = await startRealEngineGateway(3);
  ({ calls, url } = fx);
});

afterAll(async () => {
  await fx?.close();
});

describe("/v1/responses + real engine", () => {
  it("serves client.responses.create and records the call token-in/token-out", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/resp-a/v1`, apiKey: "unused", maxRetries: 0 });
    const res = await client.responses.create({ model: "arbor-tiny", input: "What is 2+3?", instructions: "You are terse.", max_output_tokens: 12, temperature: 1 });
    const call = calls.filter((c) => c.programId === "resp-a").at(-1)!;
    expect(res.object).toBe("response");
    expect(res.id).toMatch(/^resp_/);
    expect(call.outputText).not.toBe("");
    expect(res.output_text).toBe(call.outputText);
    expect(res.usage?.output_tokens).toBe(call.outputTokenIds.length);
    expect(res.usage?.input_tokens).toBe(call.promptTokenIds.length);
    expect(call.policyVersion).toBe(3);
    expect(call.messages.map((m) => m.role)).toEqual(["system", "user"]);
    if (call.finishReason === "length") expect(res).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    else expect(res.status).toBe("completed");
    // Bad input is refused in OpenAI's error shape, naming the field.
    await expect(client.responses.create({ model: "arbor-tiny", input: "x", max_output_tokens: 0 })).rejects.toMatchObject({ status: 400, param: "max_output_tokens" });
  });

  it("echoes the request's metadata in the Response, plain and streamed, as OpenAI does", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/resp-md/v1`, apiKey: "unused", maxRetries: 0 });
    const metadata = { run: "42", task: "sum" };
    const res = await client.responses.create({ model: "arbor-tiny", input: "hi", max_output_tokens: 3, metadata });
    expect(res.metadata).toEqual(metadata);
    const stream = client.responses.stream({ model: "arbor-tiny", input: "hi", max_output_tokens: 3, metadata });
    const events: { type: string; response?: { metadata?: unknown } }[] = [];
    for await (const e of stream) events.push(e);
    expect(events.find((e) => e.type === "response.created")?.response?.metadata).toEqual(metadata);
    expect((await stream.finalResponse()).metadata).toEqual(metadata);
    expect((await client.responses.create({ model: "arbor-tiny", input: "hi", max_output_tokens: 3 })).metadata).toEqual({});
  });

  it("runs an OpenAI Agents SDK agent with only the base URL changed", async () => {
    setTracingDisabled(true);
    setOpenAIAPI("responses");
    // Same class at run time; the SDK's .d.ts resolve `openai` in CommonJS mode, so TypeScript sees two types.
    const client = new OpenAI({ baseURL: `${url}/p/resp-agent/v1`, apiKey: "unused", maxRetries: 0 });
    setDefaultOpenAIClient(client as unknown as Parameters<typeof setDefaultOpenAIClient>[0]);
    const agent = new Agent({ name: "terse", instructions: "You are terse.", model: "arbor-tiny", modelSettings: { maxTokens: 12 } });
    const result = await run(agent, "What is 2+3?");
    const call = calls.filter((c) => c.programId === "resp-agent").at(-1)!;
    expect(call).toBeDefined();
    expect(call.outputText).not.toBe("");
    expect(result.finalOutput).toBe(call.outputText);
    expect(call.messages[0]).toEqual({ role: "system", content: "You are terse." });
  });
});
