// The official `openai` and `@anthropic-ai/sdk` clients get tool calls and reasoning from the made-here
// BPE + ChatML model through the gateway, streamed and not: Arbor's engine serves the model's GGUF (its
// llama.cpp tokenizer, its Jinja template, whose `<tool_call>` and `<think>` make the engine and the
// backend read answers with the hermes and think parsers) and the gateway serves the calls on its token
// path. The answers are scripted in the model's own ids (a random tiny model writes no tool call), so
// what is tested is everything around the weights: template, tokenizer, parsers, token path, surfaces.
import Anthropic from "@anthropic-ai/sdk";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBackend } from "../../backends/registry.js";
import { BackendConfigSchema } from "../../core/config.js";
import type { Call } from "../../core/types.js";
import { LlamaTokenizer } from "../../engine/llama-tokenizer.js";
import { startEngineServer, type ListeningEngineServer } from "../../engine/server.js";
import { makeModel } from "../../model/made/made-models.js";
import { ScriptedExecutor } from "../../testing/scripted-executor.js";
import { chatAnswerOf } from "../../testing/openai-chat-answer.js";
import { createGateway, type Gateway } from "../server.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-bpe-sdk-"));
const CALL = '<think>\nThe user wants Paris.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const FINAL = "<think>\nReport it.\n</think>\n\nIt is 18C and sunny.";
let tokenizer: LlamaTokenizer;
let engine: ListeningEngineServer;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];

beforeAll(async () => {
  const made = makeModel("bpe-chatml", dir, { seed: 2, nEmbd: 32, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 2048 });
  tokenizer = await LlamaTokenizer.load(made.path);
  // The model's answer depends on whether a tool result is in the prompt (the template's <tool_response>).
  const executor = new ScriptedExecutor((prompt) => (prompt.includes("<tool_response>") ? FINAL : CALL), { tokenizer, contextSize: 2048, sequences: 2 });
  engine = await startEngineServer({ name: "bpe", modelPath: made.path, policyVersion: 0, sequences: 2, contextSize: 2048, maxWaiting: 4, executor, servedModelName: "bpe-chatml" });
  // No parsers configured: the backend takes the ones the engine detected from the template, as `arbor run` wires it.
  expect(engine.served.formats).toEqual({ toolParser: "hermes", reasoningParser: "think" });
  const backend = createBackend(BackendConfigSchema.parse({ name: "bpe", type: "builtin", url: engine.url }), { ...engine.served.formats });
  gateway = createGateway({ backends: [backend], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  await tokenizer?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const weather = { type: "function" as const, function: { name: "get_weather", description: "Weather of a city.", parameters: { type: "object", properties: { city: { type: "string" } } } } };

describe("openai client ← gateway ← Arbor's engine serving the BPE + ChatML model", () => {
  for (const stream of [false, true]) {
    it(stream ? "streamed: tool-call and reasoning deltas add up; the tool loop continues the context" : "not streamed: tool_calls and reasoning_content; the tool loop continues the context", async () => {
      const programId = `bpe-oa-${stream}`;
      const client = new OpenAI({ baseURL: `${url}/p/${programId}/v1`, apiKey: "unused", maxRetries: 0 });
      const body = { model: "bpe-chatml", messages: [{ role: "user" as const, content: "Weather in Paris?" }], tools: [weather], max_tokens: 200 };
      const { message, finish } = await chatAnswerOf(client, body, stream);
      expect(finish).toBe("tool_calls");
      expect(message.reasoning_content).toBe("\nThe user wants Paris.\n");
      const tc = message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
      expect(message.tool_calls).toHaveLength(1);
      expect(tc.function).toEqual({ name: "get_weather", arguments: '{"city": "Paris"}' });
      // Recorded in the model's own ids: the output is the BPE encoding of the answer and its <|im_end|>.
      const first = calls.filter((c) => c.programId === programId)[0]!;
      expect(first.outputTokenIds).toEqual([...tokenizer.encode(CALL, { special: true }), tokenizer.encode("<|im_end|>", { special: true })[0]]);
      expect(tokenizer.decode(first.promptTokenIds, { special: true })).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');

      const res2 = await client.chat.completions.create({
        ...body,
        messages: [
          ...body.messages,
          { role: "assistant", content: null, tool_calls: [tc], reasoning_content: message.reasoning_content } as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
          { role: "tool", tool_call_id: tc.id, content: "18C, sunny" },
        ],
      });
      expect(res2.choices[0]!.message).toMatchObject({ content: "\n\nIt is 18C and sunny.", reasoning_content: "\nReport it.\n" });
      const second = calls.filter((c) => c.programId === programId)[1]!;
      // The template re-renders the answer to the engine's own ids: the context continues, no reset.
      expect(second.contextReset).toBeUndefined();
      expect(second.promptTokenIds.slice(0, first.promptTokenIds.length + first.outputTokenIds.length)).toEqual([...first.promptTokenIds, ...first.outputTokenIds]);
    });
  }
});

describe("anthropic client ← gateway ← Arbor's engine serving the BPE + ChatML model", () => {
  const tools = [{ name: "get_weather", description: "Weather of a city.", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }];

  it("messages.create: a thinking block, then tool_use", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/bpe-an-plain`, apiKey: "unused", maxRetries: 0 });
    const msg = await client.messages.create({ model: "bpe-chatml", max_tokens: 200, tools, messages: [{ role: "user", content: "Weather in Paris?" }] });
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "tool_use"]);
    expect(msg.content[0]).toMatchObject({ type: "thinking", thinking: "\nThe user wants Paris.\n" });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Paris" } });
  });

  it("messages.stream: thinking_delta and input_json_delta events, then the same blocks", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/bpe-an-stream`, apiKey: "unused", maxRetries: 0 });
    const stream = client.messages.stream({ model: "bpe-chatml", max_tokens: 200, tools, messages: [{ role: "user", content: "Weather in Paris?" }] });
    const kinds: string[] = [];
    stream.on("streamEvent", (e) => void (e.type === "content_block_delta" && kinds.push(e.delta.type)));
    const msg = await stream.finalMessage();
    expect(kinds).toContain("thinking_delta");
    expect(kinds).toContain("input_json_delta");
    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "tool_use"]);
    expect(msg.content[1]).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Paris" } });
  });
});
