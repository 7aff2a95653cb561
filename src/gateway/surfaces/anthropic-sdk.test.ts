// The real @anthropic-ai/sdk client against a tiny fastify server that wraps a canned OpenAI-shaped
// upstream answer with this folder's translators: the SDK must parse messages.create and messages.stream.
import Anthropic from "@anthropic-ai/sdk";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnthropicError } from "./anthropic-error.js";
import { anthropicToChat, type ChatRequestBody } from "./anthropic-request.js";
import { chatToAnthropic } from "./anthropic-response.js";
import { ChatChunkToAnthropicEvents, formatAnthropicSse, type ChatChunkLike } from "./anthropic-stream.js";

const completion = {
  id: "chatcmpl-canned",
  object: "chat.completion",
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: "Checking the weather.",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
      },
      finish_reason: "tool_calls",
    },
  ],
  usage: { prompt_tokens: 20, completion_tokens: 11, total_tokens: 31 },
};

const chunks: ChatChunkLike[] = [
  { id: "chatcmpl-canned", choices: [{ delta: { content: "Checking " } }] },
  { id: "chatcmpl-canned", choices: [{ delta: { content: "the weather." } }] },
  { choices: [{ delta: { tool_calls: [{ index: 0, id: "call_1", function: { name: "get_weather", arguments: '{"city":' } }] } }] },
  { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] } }] },
  { choices: [{ delta: {}, finish_reason: "tool_calls" }] },
  { choices: [], usage: { prompt_tokens: 20, completion_tokens: 11 } },
];

let app: FastifyInstance;
let client: Anthropic;
const seen: ChatRequestBody[] = [];

beforeAll(async () => {
  app = Fastify({ logger: false });
  app.post("/v1/messages", async (req, reply) => {
    let chat: ChatRequestBody;
    try {
      chat = anthropicToChat(req.body);
    } catch (e) {
      if (e instanceof AnthropicError) return reply.code(e.status).send(e.body);
      throw e;
    }
    seen.push(chat);
    const model = (req.body as { model: string }).model;
    if (!chat.stream) return chatToAnthropic(completion, model);
    const conv = new ChatChunkToAnthropicEvents(model);
    reply.raw.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const c of chunks) for (const ev of conv.push(c)) reply.raw.write(formatAnthropicSse(ev));
    for (const ev of conv.finish()) reply.raw.write(formatAnthropicSse(ev));
    reply.raw.end();
    return reply;
  });
  const base = await app.listen({ host: "127.0.0.1", port: 0 });
  client = new Anthropic({ baseURL: base, apiKey: "test-key", maxRetries: 0 });
});

afterAll(async () => {
  await app.close();
});

const params = {
  model: "claude-test",
  max_tokens: 64,
  system: "Be brief.",
  tools: [{ name: "get_weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }],
  messages: [{ role: "user" as const, content: "Weather in Paris?" }],
};

describe("@anthropic-ai/sdk against the translators", () => {
  it("parses a non-streaming answer with text and tool_use", async () => {
    const msg = await client.messages.create(params);
    expect(msg.id).toBe("msg_canned");
    expect(msg.model).toBe("claude-test");
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.content[0]).toMatchObject({ type: "text", text: "Checking the weather." });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } });
    expect(msg.usage).toMatchObject({ input_tokens: 20, output_tokens: 11 });
    const sent = seen.at(-1);
    expect(sent?.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(sent?.tools?.[0]?.function.name).toBe("get_weather");
  });

  it("parses a streamed answer into the same message", async () => {
    const stream = client.messages.stream(params);
    let text = "";
    stream.on("text", (t) => (text += t));
    const msg = await stream.finalMessage();
    expect(text).toBe("Checking the weather.");
    expect(msg.content[0]).toMatchObject({ type: "text", text: "Checking the weather." });
    expect(msg.content[1]).toMatchObject({ type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } });
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.usage).toMatchObject({ input_tokens: 20, output_tokens: 11 });
    expect(seen.at(-1)?.stream_options).toEqual({ include_usage: true });
  });

  it("surfaces validation errors as the SDK's BadRequestError", async () => {
    const err = await client.messages.create({ ...params, max_tokens: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).status).toBe(400);
    expect(String((err as Error).message)).toMatch(/max_tokens/);
  });
});
