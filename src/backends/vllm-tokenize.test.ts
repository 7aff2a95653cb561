// The chat /tokenize request of the vLLM-protocol adapters: messages in OpenAI's shape (tool calls
// and tool_call_id as chat templates render them), vLLM's `tools`, and tool_choice only for
// Arbor's engine (vLLM's TokenizeChatRequest has no such field).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage } from "../core/types.js";
import { startFixtureServer, type FixtureServer } from "../testing/fixture-server.js";
import { createArborBackend, createVllmBackend } from "./vllm.js";

let server: FixtureServer;
beforeAll(async () => {
  server = await startFixtureServer((req) => (req.path === "/tokenize" ? { json: { count: 2, max_model_len: 64, tokens: [1, 2] } } : undefined));
});
afterAll(async () => {
  await server?.close();
});

const messages: ChatMessage[] = [
  { role: "user", content: "Weather?" },
  { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }, { id: "c2", name: "noop", arguments: "{}" }] },
  { role: "tool", content: "5C", toolCallId: "c1" },
];
const tools = [{ type: "function", function: { name: "get_weather" } }];
const sentMessages = [
  { role: "user", content: "Weather?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
      { id: "c2", type: "function", function: { name: "noop", arguments: "{}" } },
    ],
  },
  { role: "tool", content: "5C", tool_call_id: "c1" },
];

describe("vLLM-protocol chat tokenize", () => {
  it("sends tool calls, tools and (to Arbor's engine only) tool_choice", async () => {
    const req = { messages, addGenerationPrompt: true, tools, toolChoice: "required" };
    expect(await createVllmBackend({ name: "v", url: `${server.root}/v1` }).tokenize!(req)).toEqual({ tokens: [1, 2], maxModelLen: 64 });
    await createArborBackend({ name: "a", url: `${server.root}/v1` }).tokenize!(req);
    const [vllm, arbor] = server.requests.filter((r) => r.path === "/tokenize").map((r) => r.body);
    expect(vllm).toEqual({ messages: sentMessages, add_generation_prompt: true, add_special_tokens: false, tools });
    expect(arbor).toEqual({ messages: sentMessages, add_generation_prompt: true, add_special_tokens: false, tools, tool_choice: "required" });
  });
});
