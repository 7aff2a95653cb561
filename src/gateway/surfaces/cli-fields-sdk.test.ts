// What coding-agent CLIs send, through the official clients to a real gateway and engine on the
// token path: a Claude-Code-shaped Messages request (system blocks with cache_control, thinking,
// metadata.user_id, tools, a tool_result with array content and is_error, stop_sequences, streamed)
// is served and recorded; a field the gateway does not serve is refused with a 400 naming it on each
// surface, and nothing is recorded.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createArborBackend } from "../../backends/vllm.js";
import type { Call } from "../../core/types.js";
import { startTinyEngine, type TinyEngine } from "../../testing/real-engine-fixture.js";
import { createGateway, type Gateway } from "../server.js";

let tiny: TinyEngine;
let gateway: Gateway;
let url: string;
const calls: Call[] = [];
const callsOf = (program: string): Call[] => calls.filter((c) => c.programId === program);

beforeAll(async () => {
  tiny = await startTinyEngine("arbor-cli-fields-");
  gateway = createGateway({ backends: [createArborBackend({ name: "t0", url: `${tiny.engine.url}/v1` })], sink: { recordCall: async (c) => void calls.push(c) } });
  url = await gateway.listen("127.0.0.1", 0);
});

afterAll(async () => {
  await gateway?.close();
  await tiny?.close();
});

const bash = { name: "bash", description: "Run a command", input_schema: { type: "object" as const, properties: { cmd: { type: "string" } } }, cache_control: { type: "ephemeral" as const } };

describe("fields real CLIs send, end to end", () => {
  it("a Claude-Code-shaped streamed Messages request is served and recorded", async () => {
    const client = new Anthropic({ baseURL: `${url}/p/cc-1`, apiKey: "unused", maxRetries: 0 });
    const stream = client.messages.stream({
      model: "claude-sonnet-4-5",
      max_tokens: 32_000,
      system: [
        { type: "text", text: "You are a coding agent.", cache_control: { type: "ephemeral" } },
        { type: "text", text: "Answer tersely." },
      ],
      metadata: { user_id: "user_abc_session_1" },
      thinking: { type: "enabled", budget_tokens: 1024 },
      // One token of the tiny policy's vocabulary (the token path honours one-token stops).
      stop_sequences: ["#"],
      tools: [bash],
      messages: [
        { role: "user", content: [{ type: "text", text: "List the files.", cache_control: { type: "ephemeral" } }] },
        { role: "assistant", content: [{ type: "thinking", thinking: "Use ls.", signature: "sig" }, { type: "tool_use", id: "toolu_1", name: "bash", input: { cmd: "ls" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", is_error: true, content: [{ type: "text", text: "ls: permission denied" }] }] },
      ],
    });
    const msg = await stream.finalMessage();
    const [call] = callsOf("cc-1");
    expect(call).toBeDefined();
    expect(msg.usage.output_tokens).toBe(call!.outputTokenIds.length);
    expect(call!.requestedModel).toBe("claude-sonnet-4-5");
    // The context of 1024 tokens leaves less than the 32,000 asked.
    expect(call!.maxTokensClamped).toEqual({ asked: 32_000, granted: 1024 - call!.promptTokenIds.length });
    expect(call!.messages).toEqual([
      { role: "system", content: "You are a coding agent.\nAnswer tersely." },
      { role: "user", content: "List the files." },
      { role: "assistant", content: "", reasoning: "Use ls.", toolCalls: [{ id: "toolu_1", name: "bash", arguments: '{"cmd":"ls"}' }] },
      { role: "tool", content: "[tool error] ls: permission denied", toolCallId: "toolu_1" },
    ]);
  });

  it("refuses what it does not serve with a 400 naming the field on every surface, recording nothing", async () => {
    const anthropic = new Anthropic({ baseURL: `${url}/p/cc-2`, apiKey: "unused", maxRetries: 0 });
    const refusedAnthropic = await anthropic.messages
      .create({ model: "claude-sonnet-4-5", max_tokens: 16, messages: [{ role: "user", content: "hi" }], mcp_servers: [] } as never)
      .catch((e: unknown) => e);
    expect(refusedAnthropic).toBeInstanceOf(Anthropic.BadRequestError);
    expect((refusedAnthropic as Error).message).toMatch(/mcp_servers: is not supported by this gateway/);
    // A stop sequence the token path cannot honour exactly (more than one token) is refused, not dropped.
    const longStop = await anthropic.messages
      .create({ model: "claude-sonnet-4-5", max_tokens: 16, messages: [{ role: "user", content: "hi" }], stop_sequences: ["\n\nHuman:"] })
      .catch((e: unknown) => e);
    expect(longStop).toBeInstanceOf(Anthropic.BadRequestError);
    const body = (longStop as InstanceType<typeof Anthropic.BadRequestError>).error as { error: { message: string } };
    expect(body.error.message).toMatch(/^stop_sequences\[0\]: "\\n\\nHuman:" is \d+ tokens for backend 't0'/);
    const openai = new OpenAI({ baseURL: `${url}/p/cc-3/v1`, apiKey: "unused", maxRetries: 0 });
    await expect(openai.chat.completions.create({ model: "o4-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 4, reasoning_effort: "high" })).rejects.toMatchObject({
      status: 400,
      param: "reasoning_effort",
    });
    await expect(openai.responses.create({ model: "gpt-5", input: "hi", max_output_tokens: 4, reasoning: { effort: "high" } })).rejects.toMatchObject({
      status: 400,
      param: "reasoning.effort",
    });
    expect([...callsOf("cc-2"), ...callsOf("cc-3")]).toEqual([]);
  });
});
