import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reasoningParserRegistry } from "../model/reasoning/registry.js";
import { chatAnswer, planTools } from "../model/tool-markup.js";
import { toolParserRegistry } from "../model/tool-parsers/registry.js";
import { ChatAnswerStream, filterToolCallChunk, modelParsers, ToolCallFilter, toolPlan } from "./openai-tools.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";
import { createEngineServer, type EngineServer } from "./server.js";

const names = new Set(["get_weather", "noop"]);

/** Feed `text` in pieces of `size` characters; the concatenated content and all calls. */
function filtered(text: string, size: number, opts: Partial<ConstructorParameters<typeof ToolCallFilter>[0]> = {}) {
  const f = new ToolCallFilter({ names, idPrefix: "call_x", ...opts });
  let content = "";
  const calls = [];
  for (let i = 0; i < text.length; i += size) {
    const got = f.push(text.slice(i, i + size));
    content += got.content;
    calls.push(...got.calls);
  }
  const rest = f.flush();
  return { content: content + rest.content, calls: [...calls, ...rest.calls] };
}

describe("ToolCallFilter", () => {
  const text = 'Checking. <|tool_call|>get_weather {"city":"Paris"}<|/tool_call|><|tool_call|>noop<|/tool_call|>';

  it("splits text and calls the same way whatever the delta sizes", () => {
    for (const size of [1, 3, 7, text.length]) {
      expect(filtered(text, size)).toEqual({
        content: "Checking. ",
        calls: [
          { id: "call_x_0", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { id: "call_x_1", type: "function", function: { name: "noop", arguments: "{}" } },
        ],
      });
    }
  });

  it("keeps invalid, unknown, unclosed and extra calls as text", () => {
    const bad = "<|tool_call|>rm -rf<|/tool_call|><|tool_call|>get_weather Paris<|/tool_call|><|tool_call|>get_weather [1]<|/tool_call|>";
    expect(filtered(bad, 2)).toEqual({ content: bad, calls: [] });
    expect(filtered("a <|tool_call|>noop {", 4)).toEqual({ content: "a <|tool_call|>noop {", calls: [] });
    expect(filtered("x <|tool_", 1)).toEqual({ content: "x <|tool_", calls: [] });
    const single = filtered(text, 5, { single: true });
    expect(single.calls.map((c) => c.function.name)).toEqual(["get_weather"]);
    expect(single.content).toBe("Checking. <|tool_call|>noop<|/tool_call|>");
  });

  it("continues a forced opening", () => {
    expect(filtered(' {"city":"Rome"}<|/tool_call|>', 2, { prefill: "<|tool_call|>get_weather" }).calls[0]?.function).toEqual({
      name: "get_weather",
      arguments: '{"city":"Rome"}',
    });
  });

  it("rewrites streamed chunks: held text, tool_calls deltas, finish_reason tool_calls", () => {
    const f = new ToolCallFilter({ names, idPrefix: "call_y" });
    const chunk = (content: string, finish: string | null = null) => ({ id: "c", choices: [{ index: 0, delta: { content }, finish_reason: finish, token_ids: [1] }] });
    const out = ["Hi <|tool_", "call|>noop", " {}<|/tool_call|>", ""].map((t, i, all) => filterToolCallChunk(f, chunk(t, i === all.length - 1 ? "stop" : null)));
    expect(out.map((c) => (c.choices as { delta: { content: string } }[])[0]?.delta.content)).toEqual(["Hi ", "", "", ""]);
    // As vLLM streams a call: id, type and name (arguments ""), then the arguments, same index.
    expect((out[2]?.choices as { delta: unknown }[])[0]?.delta).toEqual({
      content: "",
      tool_calls: [
        { index: 0, id: "call_y_0", type: "function", function: { name: "noop", arguments: "" } },
        { index: 0, function: { arguments: "{}" } },
      ],
    });
    expect((out[3]?.choices as { finish_reason: string; token_ids: number[] }[])[0]).toMatchObject({ finish_reason: "tool_calls", token_ids: [1] });
    const usage = { id: "c", choices: [], usage: { prompt_tokens: 1 } };
    expect(filterToolCallChunk(f, usage)).toBe(usage);
  });
});

describe("chat completions with tools (scripted policy)", () => {
  let server: EngineServer;
  let executor: ScriptedExecutor;
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather now", parameters: { type: "object", properties: { city: { type: "string" } } } } }];

  beforeAll(async () => {
    // Calls the tool until the conversation holds its result, then answers with it.
    executor = new ScriptedExecutor((prompt) => {
      const result = /<\|tool\|>([^<]*)<\|end\|><\|assistant\|>$/.exec(prompt);
      if (result) return `It is ${result[1]}.`;
      if (prompt.endsWith("<|tool_call|>get_weather ")) return '{"city":"Oslo"}<|/tool_call|>';
      if (prompt.endsWith("<|tool_call|>")) return 'get_weather {"city":"Bergen"}<|/tool_call|>';
      if (prompt.includes("Two cities")) return 'Both.<|tool_call|>get_weather {"city":"Paris"}<|/tool_call|><|tool_call|>get_weather {"city":"Lima","days":[1,2]}<|/tool_call|>';
      return 'Let me check.<|tool_call|>get_weather {"city":"Paris"}<|/tool_call|>';
    });
    server = await createEngineServer({ name: "t", modelPath: "", policyVersion: 1, sequences: 2, contextSize: 4096, maxWaiting: 4, executor });
  });
  afterAll(async () => {
    await server.close();
  });

  const post = async (payload: object) => server.app.inject({ method: "POST", url: "/v1/chat/completions", payload });

  it("declares the tools, answers tool_calls and renders them back in the next prompt", async () => {
    const res = await post({ messages: [{ role: "user", content: "Weather in Paris?" }], tools, return_token_ids: true });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(executor.prompts.at(-1)).toContain("- get_weather: Weather now");
    const choice = body.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBe("Let me check.");
    expect(choice.message.tool_calls).toEqual([{ id: expect.stringMatching(/^call_[0-9a-f]+_0$/), type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }]);
    const call = choice.message.tool_calls[0];
    const next = await post({
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: choice.message.content, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "18C" },
      ],
      tools,
      return_token_ids: true,
    });
    expect(next.json().choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "It is 18C." } });
    // Token-in/token-out: the assistant turn renders back to exactly the tokens the policy produced.
    const prompt: number[] = next.json().prompt_token_ids;
    const produced: number[] = choice.token_ids.slice(0, -1);
    expect(prompt.join(",")).toContain([...body.prompt_token_ids, ...produced].join(","));
  });

  it("streams the same answer: content deltas without markup, the call as vLLM streams it (name, then arguments)", async () => {
    const res = await post({ messages: [{ role: "user", content: "Weather in Paris?" }], tools, stream: true });
    const chunks = res.body
      .split("\n\n")
      .filter((b) => b.startsWith("data: {"))
      .map((b) => JSON.parse(b.slice(6)));
    const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
    expect(deltas.map((d) => d.content ?? "").join("")).toBe("Let me check.");
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(calls).toEqual([
      { index: 0, id: expect.stringMatching(/^call_[0-9a-f]+_0$/), type: "function", function: { name: "get_weather", arguments: "" } },
      { index: 0, function: { arguments: '{"city":"Paris"}' } },
    ]);
    expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
  });

  it("the openai client's stream helper adds the streamed deltas up to the non-streamed answer", async () => {
    const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const withoutIds = (m: OpenAI.ChatCompletionMessage) => ({ ...m, tool_calls: m.tool_calls?.map((c, i) => ({ ...c, id: c.id.replace(/^call_[0-9a-f]+_/, `call_${i}_`) })) });
    for (const content of ["Weather in Paris?", "Two cities please"]) {
      const params = { model: "arbor-tiny", messages: [{ role: "user" as const, content }], tools: tools as OpenAI.ChatCompletionTool[] };
      const plain = await client.chat.completions.create(params);
      const streamed = await client.chat.completions.stream(params).finalChatCompletion();
      expect(streamed.choices[0]?.finish_reason).toBe("tool_calls");
      expect(plain.choices[0]?.finish_reason).toBe("tool_calls");
      expect(withoutIds(streamed.choices[0]!.message)).toMatchObject(withoutIds(plain.choices[0]!.message));
      expect(streamed.choices[0]?.message.tool_calls?.length).toBe(content.startsWith("Two") ? 2 : 1);
    }
  });

  it("forces a named tool, honours tool_choice none and rejects unknown names", async () => {
    const forced = await post({ messages: [{ role: "user", content: "Weather?" }], tools, tool_choice: { type: "function", function: { name: "get_weather" } } });
    expect(executor.prompts.at(-1)?.endsWith("<|assistant|><|tool_call|>get_weather ")).toBe(true);
    expect(forced.json().choices[0].message.tool_calls[0].function).toEqual({ name: "get_weather", arguments: '{"city":"Oslo"}' });
    const required = await post({ messages: [{ role: "user", content: "Weather?" }], tools, tool_choice: "required" });
    expect(required.json().choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { content: null, tool_calls: [{ function: { name: "get_weather", arguments: '{"city":"Bergen"}' } }] } });
    const none = await post({ messages: [{ role: "user", content: "Weather?" }], tools, tool_choice: "none" });
    expect(none.json().choices[0]).toMatchObject({ finish_reason: "stop", message: { content: 'Let me check.<|tool_call|>get_weather {"city":"Paris"}<|/tool_call|>' } });
    const unknown = await post({ messages: [{ role: "user", content: "x" }], tools, tool_choice: { type: "function", function: { name: "nope" } } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.param).toBe("tool_choice.function.name");
    const noTools = await post({ messages: [{ role: "user", content: "x" }], tool_choice: "required" });
    expect(noTools.json().error.param).toBe("tool_choice");
    const nullUser = await post({ messages: [{ role: "user", content: null }] });
    expect(nullUser.json().error.param).toBe("messages[0].content");
    const badTool = await post({ messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search" }] });
    expect(badTool.statusCode).toBe(400);
  });

  it("/tokenize renders tools, tool_calls history and a forced call's opening exactly as the chat endpoint does", async () => {
    const messages = [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "c1", content: "18C" },
    ];
    for (const tool_choice of [undefined, "auto", "none", "required", { type: "function", function: { name: "get_weather" } }]) {
      const chat = await post({ messages, tools, tool_choice, return_token_ids: true, max_tokens: 1 });
      const tok = await server.app.inject({ method: "POST", url: "/tokenize", payload: { messages, tools, tool_choice } });
      expect(tok.statusCode).toBe(200);
      expect(tok.json().tokens, JSON.stringify(tool_choice)).toEqual(chat.json().prompt_token_ids);
    }
    // The forced opening belongs to the generation prompt only.
    const forced = { messages, tools, tool_choice: "required" };
    const plain = (await server.app.inject({ method: "POST", url: "/tokenize", payload: { messages, tools, add_generation_prompt: false } })).json().tokens;
    const without = (await server.app.inject({ method: "POST", url: "/tokenize", payload: { ...forced, add_generation_prompt: false } })).json().tokens;
    expect(without).toEqual(plain);
    const bad = await server.app.inject({ method: "POST", url: "/tokenize", payload: { messages, tools, tool_choice: { type: "function", function: { name: "nope" } } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.param).toBe("tool_choice.function.name");
  });

  it("leaves requests without tools untouched (markup stays in content)", async () => {
    const res = await post({ messages: [{ role: "user", content: "Weather in Paris?" }] });
    expect(res.json().choices[0]).toMatchObject({ finish_reason: "stop", message: { content: 'Let me check.<|tool_call|>get_weather {"city":"Paris"}<|/tool_call|>' } });
    expect(executor.prompts.at(-1)).not.toContain("You can call these tools");
  });
});

describe("streamed chunks of other formats: Qwen3 (hermes + <think>)", () => {
  const hermes = toolParserRegistry.create("hermes");
  const think = reasoningParserRegistry.create("think");
  const plan = planTools({ tools: [{ function: { name: "get_weather" } }, { function: { name: "noop" } }] }, hermes, think)!;
  const answer =
    '<think>\nThe user wants the weather.\n</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>';

  /** The answer as a vLLM-style chunk stream cut every `size` characters, through the filter. */
  const chunks = (size: number) => {
    const reader = new ChatAnswerStream(plan, "call_q");
    const out = [];
    for (let i = 0; i < answer.length; i += size) {
      const last = i + size >= answer.length;
      out.push(filterToolCallChunk(reader, { id: "c", object: "chat.completion.chunk", created: 1, model: "q", choices: [{ index: 0, delta: { ...(i === 0 ? { role: "assistant" } : {}), content: answer.slice(i, i + size) }, finish_reason: last ? "stop" : null }] }));
    }
    return out;
  };

  it("adds up to chatAnswer's message (reasoning, content, calls), whatever the chunk sizes", () => {
    const whole = chatAnswer(answer, "stop", plan, "call_q");
    expect(whole).toEqual({
      message: {
        role: "assistant",
        content: "\n\nChecking.",
        reasoning_content: "\nThe user wants the weather.\n",
        tool_calls: [
          { id: "call_q_0", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } },
          { id: "call_q_1", type: "function", function: { name: "noop", arguments: "{}" } },
        ],
      },
      finishReason: "tool_calls",
    });
    for (const size of [1, 2, 5, 17, answer.length]) {
      const deltas = chunks(size).map((c) => (c.choices as { delta: { content: string; reasoning_content?: string; tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[] } }[])[0]!.delta);
      expect(deltas.map((d) => d.reasoning_content ?? "").join("")).toBe(whole.message.reasoning_content);
      expect(deltas.map((d) => d.content).join("")).toBe(whole.message.content);
      const calls: { id?: string; name?: string; arguments: string }[] = [];
      for (const tc of deltas.flatMap((d) => d.tool_calls ?? [])) {
        const at = (calls[tc.index] ??= { arguments: "" });
        if (tc.id) at.id = tc.id;
        if (tc.function.name) at.name = tc.function.name;
        at.arguments += tc.function.arguments;
      }
      expect(calls).toEqual(whole.message.tool_calls!.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })));
      expect((chunks(size).at(-1)!.choices as { finish_reason: string }[])[0]!.finish_reason).toBe("tool_calls");
    }
  });

  it("the openai client's stream helper reads the chunks into the same content and tool calls", async () => {
    const sse = chunks(3)
      .map((c) => `data: ${JSON.stringify(c)}\n\n`)
      .join("");
    const fetch = async () => new Response(`${sse}data: [DONE]\n\n`, { headers: { "content-type": "text/event-stream" } });
    const client = new OpenAI({ baseURL: "http://scripted.invalid/v1", apiKey: "unused", maxRetries: 0, fetch });
    const final = await client.chat.completions.stream({ model: "q", messages: [{ role: "user", content: "Weather?" }] }).finalChatCompletion();
    const whole = chatAnswer(answer, "stop", plan, "call_q");
    expect(final.choices[0]?.finish_reason).toBe("tool_calls");
    expect(final.choices[0]?.message).toMatchObject({ role: "assistant", content: whole.message.content, tool_calls: whole.message.tool_calls });
  });

  it("splits reasoning without tools, and leaves a forced call's answer unread for reasoning", () => {
    expect(chatAnswer("<think>hm</think>Hi", "stop", undefined, "x", think)).toEqual({ message: { role: "assistant", content: "Hi", reasoning_content: "hm" }, finishReason: "stop" });
    expect(chatAnswer("Hi", "length", undefined, "x")).toEqual({ message: { role: "assistant", content: "Hi" }, finishReason: "length" });
    const forced = planTools({ tools: [{ function: { name: "noop" } }], tool_choice: "required" }, hermes, think)!;
    expect(forced.prefill).toBe("<tool_call>\n");
    expect(chatAnswer('{"name": "noop", "arguments": {}}\n</tool_call>', "stop", forced, "x").message).toEqual({ role: "assistant", content: null, tool_calls: [{ id: "x_0", type: "function", function: { name: "noop", arguments: "{}" } }] });
  });
});

describe("toolPlan / modelParsers: a model's formats by registry name", () => {
  const tools = [{ function: { name: "noop" } }];

  it("plans with the named parsers; the tiny policy's markup and no reasoning by default", () => {
    expect(toolPlan({ tools, tool_choice: "required" })).toMatchObject({ prefill: "<|tool_call|>", parser: { name: "arbor" } });
    expect(toolPlan({ tools })?.reasoning).toBeUndefined();
    const qwen3 = toolPlan({ tools, tool_choice: "required" }, { toolParser: "hermes", reasoningParser: "think" });
    expect(qwen3).toMatchObject({ prefill: "<tool_call>\n", parser: { name: "hermes" }, reasoning: { name: "think", startsInReasoning: false } });
    expect(modelParsers({ reasoningParser: "think", startsInReasoning: true }).reasoning).toMatchObject({ name: "think", startsInReasoning: true });
    expect(modelParsers({ reasoningParser: "none" }).reasoning).toBeUndefined();
  });

  it("names the known parsers for an unknown name", () => {
    expect(() => toolPlan({ tools }, { toolParser: "granite" })).toThrow("unknown tool-call parser 'granite' (known: arbor, hermes, llama3_json, mistral)");
    expect(() => modelParsers({ reasoningParser: "r1" })).toThrow("unknown reasoning parser 'r1' (known: none, think)");
  });
});
