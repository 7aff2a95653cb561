// Tool calling through every surface, with the real SDKs against the gateway and the built-in
// engine's HTTP surface. The tiny policy is untrained and never calls tools, so a scripted executor
// writes the policy's tool-call markup; everything between the SDKs and it is real.
import Anthropic from "@anthropic-ai/sdk";
import { run, type Agent } from "@openai/agents";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBuiltinBackend } from "../../backends/builtin.js";
import type { Call } from "../../core/types.js";
import type { ListeningEngineServer } from "../../engine/server.js";
import { createGateway, type Gateway } from "../server.js";
import { startScriptedEngine, weatherAgent, weatherPolicy, weatherTool } from "../../testing/weather-tools-fixture.js";

const policy = weatherPolicy();

let engine: ListeningEngineServer;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];
const callsOf = (programId: string): Call[] => calls.filter((c) => c.programId === programId);

beforeAll(async () => {
  engine = await startScriptedEngine(policy);
  gateway = createGateway({ backends: [createBuiltinBackend({ name: "scripted", url: `${engine.url}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
});


describe("OpenAI chat with tools", () => {
  it("gets tool_calls, plain and streamed, and the tool result round-trips", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/chat-tools/v1`, apiKey: "unused", maxRetries: 0 });
    const tools = [{ type: "function" as const, function: weatherTool }];
    const messages = [{ role: "user" as const, content: "Weather in Paris?" }];
    const res = await client.chat.completions.create({ model: "arbor-tiny", messages, tools });
    const choice = res.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBe("Checking.");
    const tc = choice.message.tool_calls?.[0];
    expect(tc).toMatchObject({ type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } });
    const streamed = await client.chat.completions.stream({ model: "arbor-tiny", messages, tools }).finalChatCompletion();
    expect(streamed.choices[0]?.finish_reason).toBe("tool_calls");
    expect(streamed.choices[0]?.message.tool_calls?.[0]?.function).toEqual({ name: "get_weather", arguments: '{"city":"Paris"}' });
    const next = await client.chat.completions.create({
      model: "arbor-tiny",
      tools,
      messages: [...messages, choice.message, { role: "tool", tool_call_id: tc!.id, content: "18C" }],
    });
    expect(next.choices[0]?.message.content).toBe("It is 18C.");
    // Every call is traced, the tool-calling ones included.
    const traced = callsOf("chat-tools");
    expect(traced).toHaveLength(3);
    expect(traced.every((c) => c.outputTokenIds.length > 0 && c.logprobs.length === c.outputTokenIds.length)).toBe(true);
    // Token-in/token-out: the tool-calling turn is in the next prompt exactly as the policy produced it.
    const [first, , third] = traced as [Call, Call, Call];
    expect(third.promptTokenIds.join(",")).toContain([...first.promptTokenIds, ...first.outputTokenIds.slice(0, -1)].join(","));
  });
});

describe("Anthropic messages with tools", () => {
  it("streams a tool_use block, then answers from the tool_result", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/msg-tools`, apiKey: "unused", maxRetries: 0 });
    const tools = [{ name: "get_weather", description: "Current weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }];
    const first = await client.messages.stream({ model: "arbor-tiny", max_tokens: 64, tools, messages: [{ role: "user", content: "Weather in Rome?" }] }).finalMessage();
    expect(first.stop_reason).toBe("tool_use");
    expect(first.content[0]).toMatchObject({ type: "text", text: "Checking." });
    const use = first.content[1];
    expect(use).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Rome" } });
    const second = await client.messages.create({
      model: "arbor-tiny",
      max_tokens: 64,
      tools,
      messages: [
        { role: "user", content: "Weather in Rome?" },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: (use as { id: string }).id, content: "25C" }] },
      ],
    });
    expect(second.content).toEqual([expect.objectContaining({ type: "text", text: "It is 25C." })]);
    expect(second.stop_reason).toBe("end_turn");
    expect(callsOf("msg-tools")).toHaveLength(2);
  });
});

describe("OpenAI Responses with tools", () => {
  it("streams a function_call item with its arguments", async () => {
    const client = new OpenAI({ baseURL: `${url}/p/resp-tools/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = client.responses.stream({ model: "arbor-tiny", input: "Weather in Lima?", tools: [{ type: "function", strict: false, ...weatherTool }] });
    const types: string[] = [];
    stream.on("event", (e) => types.push(e.type));
    const res = await stream.finalResponse();
    expect(res.status).toBe("completed");
    expect(res.output.map((o) => o.type)).toEqual(["message", "function_call"]);
    expect(res.output[1]).toMatchObject({ type: "function_call", name: "get_weather", arguments: '{"city":"Lima"}', call_id: expect.stringMatching(/^call_/) });
    expect(types).toContain("response.function_call_arguments.done");
    expect(callsOf("resp-tools")).toHaveLength(1);
  });
});

describe("OpenAI Agents SDK with a function tool (only the base URL changed)", () => {
  let asked: string[];
  let agent: Agent;

  beforeAll(() => {
    // The SDK keeps the first default client it used: one program for both runs below.
    ({ agent, asked } = weatherAgent(`${url}/p/agent-tools/v1`));
  });

  it("calls the tool and finishes with its result", async () => {
    const result = await run(agent, "Weather in Paris?");
    expect(asked).toEqual(["Paris"]);
    expect(result.finalOutput).toBe("It is 15C.");
    const traced = callsOf("agent-tools");
    expect(traced).toHaveLength(2);
    expect(traced[1]?.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
  });

  it("does the same streamed", async () => {
    const before = callsOf("agent-tools").length;
    const result = await run(agent, "Weather in Kyiv?", { stream: true });
    let text = "";
    for await (const chunk of result.toTextStream()) text += chunk;
    await result.completed;
    expect(asked).toEqual(["Paris", "Kyiv"]);
    expect(result.finalOutput).toBe("It is 14C.");
    expect(text).toBe("Checking.It is 14C.");
    expect(callsOf("agent-tools").length - before).toBe(2);
  });
});
