// The official `openai` and `@anthropic-ai/sdk` clients against the gateway's token path, in front of
// a model that is not Arbor's: a Qwen3-like Jinja chat template, Hermes tool calls and `<think>`
// reasoning, read by the backend's parsers. Tool calls and reasoning reach both clients, streamed
// and not, and the turn they send back continues the recorded context.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reasoningParserNamed, toolParserNamed } from "../../backends/answer-parsers.js";
import type { Call, ChatMessage } from "../../core/types.js";
import { CHATML_CONTROL, QWEN3_LIKE_TEMPLATE, QWEN_ADDED } from "../../testing/chat-template-fixtures.js";
import { jinjaChatModel, templateBackend, type TemplateBackend } from "../../testing/template-backend.js";
import { chatAnswerOf } from "../../testing/openai-chat-answer.js";
import { createGateway, type Gateway } from "../server.js";

const model = jinjaChatModel("qwen3-like", QWEN3_LIKE_TEMPLATE, CHATML_CONTROL, QWEN_ADDED, ["<|im_end|>"]);
let backend: TemplateBackend;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];

const weather = { type: "function" as const, function: { name: "get_weather", description: "Weather of a city.", parameters: { type: "object", properties: { city: { type: "string" } } } } };
const turn = { content: "", reasoning: "The user wants Paris.", toolCalls: [{ name: "get_weather", arguments: '{"city":"Paris"}' }] };
const history: ChatMessage[] = [{ role: "user", content: "Weather in Paris?" }];

beforeAll(async () => {
  backend = templateBackend({ name: "qwen", model, toolParser: toolParserNamed("hermes", "test"), reasoningParser: reasoningParserNamed("think", "test") });
  gateway = createGateway({ backends: [backend], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
});

describe("openai client: tool calls and reasoning on the token path of a Hermes/think model", () => {
  for (const stream of [false, true]) {
    it(stream ? "streamed (vLLM-style tool-call deltas, reasoning_content deltas)" : "not streamed", async () => {
      const programId = `oa-${stream}`;
      const client = new OpenAI({ baseURL: `${url}/p/${programId}/v1`, apiKey: "unused", maxRetries: 0 });
      backend.script({ history, tools: [weather], turn });
      const body = { model: "qwen", messages: [{ role: "user" as const, content: "Weather in Paris?" }], tools: [weather], max_tokens: 500 };
      const { message, finish } = await chatAnswerOf(client, body, stream);
      expect(finish).toBe("tool_calls");
      expect(message.content ?? "").toBe("");
      // Qwen3's template writes the reasoning between newlines; the parser keeps them, as vLLM's does.
      expect(message.reasoning_content).toBe("\nThe user wants Paris.\n");
      expect(message.tool_calls).toHaveLength(1);
      const tc = message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
      expect(tc).toMatchObject({ type: "function", function: { name: "get_weather" } });
      expect(JSON.parse(tc.function.arguments)).toEqual({ city: "Paris" });
      const first = calls.filter((c) => c.programId === programId)[0]!;
      expect(first.promptTokenIds).toEqual(model.render(history, true, [weather]));

      // The agent sends the turn back with its reasoning and a tool result: the context continues.
      const back: ChatMessage = { role: "assistant", content: "", toolCalls: [{ id: tc.id, name: "get_weather", arguments: tc.function.arguments }], reasoning: message.reasoning_content! };
      const result: ChatMessage = { role: "tool", content: "18C, sunny", toolCallId: tc.id };
      backend.script({ history: [...history, back, result], tools: [weather], turn: { content: "It is 18C and sunny.", reasoning: "Report it." } });
      const res2 = await client.chat.completions.create({
        ...body,
        messages: [
          ...body.messages,
          { role: "assistant", content: null, tool_calls: [tc], reasoning_content: message.reasoning_content } as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
          { role: "tool", tool_call_id: tc.id, content: "18C, sunny" },
        ],
      });
      expect(res2.choices[0]!.message.content).toBe("\n\nIt is 18C and sunny.");
      const second = calls.filter((c) => c.programId === programId)[1]!;
      expect(second.contextReset).toBeUndefined();
      expect(second.promptTokenIds).toEqual(model.render([...history, back, result], true, [weather]));
    });
  }
});

describe("anthropic client: thinking and tool_use blocks from the token path", () => {
  const tools = [{ name: "get_weather", description: "Weather of a city.", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }];
  // The Messages surface turns tools into OpenAI ones without the parameters' extra fields.
  const openAiTools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city.", parameters: { type: "object", properties: { city: { type: "string" } } } } }];

  it("messages.create: a thinking block, then tool_use", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/an-plain`, apiKey: "unused", maxRetries: 0 });
    backend.script({ history, tools: openAiTools, turn });
    const msg = await client.messages.create({ model: "qwen", max_tokens: 500, tools, messages: [{ role: "user", content: "Weather in Paris?" }] });
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "tool_use"]);
    expect(msg.content[0]).toMatchObject({ type: "thinking", thinking: "\nThe user wants Paris.\n" });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Paris" } });

    // The turn sent back with its thinking block continues the context.
    const use = msg.content[1] as Anthropic.ToolUseBlock;
    backend.script({
      history: [...history, { role: "assistant", content: "", toolCalls: [{ id: use.id, name: "get_weather", arguments: '{"city":"Paris"}' }], reasoning: "\nThe user wants Paris.\n" }, { role: "tool", content: "18C", toolCallId: use.id }],
      tools: openAiTools,
      turn: { content: "18C.", reasoning: "ok" },
    });
    const next = await client.messages.create({
      model: "qwen",
      max_tokens: 500,
      tools,
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: msg.content as Anthropic.ContentBlockParam[] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18C" }] },
      ],
    });
    expect(next.content.map((b) => b.type)).toEqual(["thinking", "text"]);
    const recorded = calls.filter((c) => c.programId === "an-plain");
    expect(recorded[1]?.contextReset).toBeUndefined();
  });

  it("messages.stream: thinking_delta events, then the tool_use block", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/an-stream`, apiKey: "unused", maxRetries: 0 });
    backend.script({ history, tools: openAiTools, turn });
    const stream = client.messages.stream({ model: "qwen", max_tokens: 500, tools, messages: [{ role: "user", content: "Weather in Paris?" }] });
    const kinds: string[] = [];
    stream.on("streamEvent", (e) => void (e.type === "content_block_delta" && kinds.push(e.delta.type)));
    const msg = await stream.finalMessage();
    expect(kinds).toContain("thinking_delta");
    expect(kinds).toContain("input_json_delta");
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "tool_use"]);
    expect(msg.content[0]).toMatchObject({ type: "thinking", thinking: "\nThe user wants Paris.\n" });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Paris" } });
  });
});
