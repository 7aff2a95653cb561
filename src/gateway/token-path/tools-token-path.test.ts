// Tool calling on the token path: the gateway in front of Arbor's engine through createArborBackend
// (as `arbor run` builds it) renders tools via the engine's /tokenize, generates from token ids and
// reads the policy's tool-call markup into tool_calls itself. The same scenarios as
// surfaces/tools-sdk.test.ts (which runs them through the passthrough), with the real SDKs; the
// untrained tiny policy never calls tools, so a scripted executor writes the markup.
import Anthropic from "@anthropic-ai/sdk";
import { run } from "@openai/agents";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBackend } from "../../backends/registry.js";
import { createArborBackend, createVllmBackend } from "../../backends/vllm.js";
import { BackendConfigSchema } from "../../core/config.js";
import type { Call } from "../../core/types.js";
import type { ListeningEngineServer } from "../../engine/server.js";
import { createGateway, type Gateway } from "../server.js";
import { startScriptedEngine, weatherAgent, weatherPolicy, weatherTool } from "../../testing/weather-tools-fixture.js";

const policy = weatherPolicy();

let engine: ListeningEngineServer;
let gateway: Gateway;
let vllmGateway: Gateway;
let parsedGateway: Gateway;
let parsedUrl: string;
let url: string;
let vllmUrl: string;
const calls: Call[] = [];
const callsOf = (programId: string): Call[] => calls.filter((c) => c.programId === programId);

beforeAll(async () => {
  engine = await startScriptedEngine(policy);
  gateway = createGateway({ backends: [createArborBackend({ name: "arbor", url: `${engine.url}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
  // The same engine seen as a vLLM server: the gateway cannot know a vLLM model's tool-call format.
  vllmGateway = createGateway({ backends: [createVllmBackend({ name: "vllm", url: `${engine.url}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  vllmUrl = await vllmGateway.listen("127.0.0.1", 0);
  // …unless the config names the served model's tool-call format: then the gateway reads the calls itself.
  const parsed = createBackend(BackendConfigSchema.parse({ name: "vllm-parsed", type: "vllm", url: `${engine.url}/v1`, toolParser: "arbor" }));
  parsedGateway = createGateway({ backends: [parsed], sink: { recordCall: async (c) => void calls.push(c) } });
  parsedUrl = await parsedGateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await vllmGateway?.close();
  await parsedGateway?.close();
  await gateway?.close();
  await engine?.close();
});

const tools = [{ type: "function" as const, function: weatherTool }];

/** Whether the gateway built the answer itself (token path): its id derives from the call id. */
const tokenPathAnswer = (id: string, callId: string | null): boolean => callId !== null && id === `chatcmpl-${callId.replaceAll("-", "")}`;

describe("OpenAI chat with tools on the token path", () => {
  it("gets tool_calls, and the tool result turn continues the first prompt ‖ output ids", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-chat/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Weather in Paris?" }];
    const { data: res, response } = await client.chat.completions.create({ model: "arbor-tiny", messages, tools }).withResponse();
    expect(tokenPathAnswer(res.id, response.headers.get("x-arbor-call-id"))).toBe(true);
    const choice = res.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBe("Checking.");
    const tc = choice.message.tool_calls?.[0];
    expect(tc).toMatchObject({ type: "function", id: expect.stringMatching(/^call_[0-9a-f]+_0$/), function: { name: "get_weather", arguments: '{"city":"Paris"}' } });
    // The prompt is what the engine's chat endpoint renders for the same request (tools included).
    expect(policy.prompts.at(-1)).toContain("You can call these tools");

    const next = await client.chat.completions.create({ model: "arbor-tiny", tools, messages: [...messages, choice.message, { role: "tool", tool_call_id: tc!.id, content: "18C" }] });
    expect(next.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "It is 18C." } });
    const [first, second] = callsOf("tp-chat") as [Call, Call];
    expect(callsOf("tp-chat")).toHaveLength(2);
    expect(first.outputText).toBe('Checking.<|tool_call|>get_weather {"city":"Paris"}<|/tool_call|>');
    // Token-in/token-out: the second prompt is the first prompt ‖ the first output ‖ the tool turn.
    expect(second.contextReset).toBeUndefined();
    const context = [...first.promptTokenIds, ...first.outputTokenIds];
    expect(second.promptTokenIds.slice(0, context.length)).toEqual(context);
    expect(second.promptTokenIds.length).toBeGreaterThan(context.length);
    expect(second.messages[1]).toEqual({ role: "assistant", content: "Checking.", toolCalls: [{ id: tc!.id, name: "get_weather", arguments: '{"city":"Paris"}' }] });
    expect(second.messages[2]).toEqual({ role: "tool", content: "18C", toolCallId: tc!.id });
  });

  it("forces a named tool with the engine's prefill and reads the continued call", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-forced/v1`, apiKey: "unused", maxRetries: 0 });
    const res = await client.chat.completions.create({
      model: "arbor-tiny",
      messages: [{ role: "user", content: "Weather?" }],
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    expect(policy.prompts.at(-1)?.endsWith("<|assistant|><|tool_call|>get_weather ")).toBe(true);
    expect(res.choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { content: null, tool_calls: [{ function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] } });
    // The forced opening is prompt, not output: the trace holds only what the policy generated.
    const [call] = callsOf("tp-forced") as [Call];
    expect(call.outputText).toBe('{"city":"Oslo"}<|/tool_call|>');
    // The gateway appended the opening itself (special tokens read as such): exactly the ids the
    // engine's own render of the forced request has, `<|tool_call|>` as its control token.
    const own = await fetch(`${engine.url}/tokenize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Weather?" }], tools, tool_choice: { type: "function", function: { name: "get_weather" } } }),
    });
    expect(call.promptTokenIds).toEqual(((await own.json()) as { tokens: number[] }).tokens);
    const bad = await client.chat.completions
      .create({ model: "arbor-tiny", messages: [{ role: "user", content: "x" }], tools, tool_choice: { type: "function", function: { name: "nope" } } })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("tool_choice.function.name");
  });

  it("a streamed tool call (token path) is continued from its ids too", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-stream/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Weather in Lima?" }];
    const streamed = await client.chat.completions.stream({ model: "arbor-tiny", messages, tools }).finalChatCompletion();
    const msg = streamed.choices[0]!.message;
    expect(msg.tool_calls?.[0]?.function).toEqual({ name: "get_weather", arguments: '{"city":"Lima"}' });
    const next = await client.chat.completions.create({
      model: "arbor-tiny",
      tools,
      messages: [...messages, { role: "assistant", content: msg.content, tool_calls: msg.tool_calls }, { role: "tool", tool_call_id: msg.tool_calls![0]!.id, content: "20C" }],
    });
    expect(next.choices[0]?.message.content).toBe("It is 20C.");
    const [first, second] = callsOf("tp-stream") as [Call, Call];
    expect(second.contextReset).toBeUndefined();
    expect(second.promptTokenIds.slice(0, first.promptTokenIds.length + first.outputTokenIds.length)).toEqual([...first.promptTokenIds, ...first.outputTokenIds]);
  });

  it("resets the context when the agent sends back other tool calls than the policy made", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/tp-edit/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Weather in Rome?" }];
    const res = await client.chat.completions.create({ model: "arbor-tiny", messages, tools });
    const tc = res.choices[0]!.message.tool_calls![0]!;
    const edited = { ...tc, function: { name: "get_weather", arguments: '{"city":"Milan"}' } };
    await client.chat.completions.create({ model: "arbor-tiny", tools, messages: [...messages, { role: "assistant", content: "Checking.", tool_calls: [edited] }, { role: "tool", tool_call_id: tc.id, content: "9C" }] });
    expect(callsOf("tp-edit")[1]?.contextReset).toBe(true);
  });

  it("sends tool requests to a vLLM-type backend through the passthrough (its tool parser is the engine's)", async () => {
    const client = new OpenAI({ baseURL: `${vllmUrl}/p/tp-vllm/v1`, apiKey: "unused", maxRetries: 0 });
    const { data: withTools, response } = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "Weather in Oslo?" }], tools }).withResponse();
    expect(tokenPathAnswer(withTools.id, response.headers.get("x-arbor-call-id"))).toBe(false);
    expect(withTools.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: "get_weather", arguments: '{"city":"Oslo"}' } });
    const { data: plain, response: plainResponse } = await client.chat.completions.create({ model: "arbor-tiny", messages: [{ role: "user", content: "Hello" }] }).withResponse();
    expect(tokenPathAnswer(plain.id, plainResponse.headers.get("x-arbor-call-id"))).toBe(true);
    expect(callsOf("tp-vllm")).toHaveLength(2);
  });
});

describe("tool calls on the token path of a vLLM-type backend with a configured toolParser", () => {
  it("reads the calls with the backend's parser and continues the context through the tool loop", async () => {
    const client = new OpenAI({ baseURL: `${parsedUrl}/p/tp-parsed/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "Weather in Oslo?" }];
    const { data: res, response } = await client.chat.completions.create({ model: "arbor-tiny", messages, tools }).withResponse();
    expect(tokenPathAnswer(res.id, response.headers.get("x-arbor-call-id"))).toBe(true);
    const tc = res.choices[0]!.message.tool_calls![0]!;
    expect(tc).toMatchObject({ type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } });
    const next = await client.chat.completions.create({ model: "arbor-tiny", tools, messages: [...messages, res.choices[0]!.message, { role: "tool", tool_call_id: tc.id, content: "3C" }] });
    expect(next.choices[0]?.finish_reason).toBe("stop");
    const [first, second] = callsOf("tp-parsed") as [Call, Call];
    expect(first.backend).toBe("vllm-parsed");
    expect(second.contextReset).toBeUndefined();
    expect(second.promptTokenIds.slice(0, first.promptTokenIds.length + first.outputTokenIds.length)).toEqual([...first.promptTokenIds, ...first.outputTokenIds]);
  });
});

describe("Anthropic messages with tools on the token path", () => {
  it("answers tool_use, then continues from the tool_result without a context reset", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/tp-msg`, apiKey: "unused", maxRetries: 0 });
    const atools = [{ name: "get_weather", description: "Current weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }];
    const first = await client.messages.create({ model: "arbor-tiny", max_tokens: 64, tools: atools, messages: [{ role: "user", content: "Weather in Rome?" }] });
    expect(first.stop_reason).toBe("tool_use");
    expect(first.content[0]).toMatchObject({ type: "text", text: "Checking." });
    const use = first.content[1];
    expect(use).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Rome" } });
    const second = await client.messages.create({
      model: "arbor-tiny",
      max_tokens: 64,
      tools: atools,
      messages: [
        { role: "user", content: "Weather in Rome?" },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: (use as { id: string }).id, content: "25C" }] },
      ],
    });
    expect(second.content).toEqual([expect.objectContaining({ type: "text", text: "It is 25C." })]);
    expect(second.stop_reason).toBe("end_turn");
    const [a, b] = callsOf("tp-msg") as [Call, Call];
    expect(b.contextReset).toBeUndefined();
    expect(b.promptTokenIds.slice(0, a.promptTokenIds.length + a.outputTokenIds.length)).toEqual([...a.promptTokenIds, ...a.outputTokenIds]);
  });
});

describe("OpenAI Agents SDK with a function tool on the token path", () => {
  it("calls the tool and finishes with its result", async () => {
    const { agent, asked } = weatherAgent(`${url}/p/tp-agent/v1`);
    const result = await run(agent, "Weather in Paris?");
    expect(asked).toEqual(["Paris"]);
    expect(result.finalOutput).toBe("It is 15C.");
    const traced = callsOf("tp-agent");
    expect(traced).toHaveLength(2);
    expect(traced[1]?.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(traced[1]?.contextReset).toBeUndefined();
  });
});
