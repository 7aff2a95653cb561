// The token path's prompts against the chat template itself, property-based: multi-turn tool
// conversations (user turns, tool calls with random JSON arguments, tool results, reasoning, forced
// calls, tools that change) driven through the gateway with the official `openai` client, streamed
// and not, in front of a scripted engine that answers with exactly the template's rendering of a
// chosen assistant turn. At every call, either the recorded prompt ids are the ids of rendering the
// FULL conversation with the template (plus a forced call's opening), or the call records a
// contextReset with its reason: never a silent mismatch. Templates: Arbor's own, a Qwen2.5-like
// ChatML with tools in the system turn (it changes when tools change), and a Qwen3-like one that
// drops earlier `<think>` blocks once a new query follows.
import fc from "fast-check";
import OpenAI from "openai";
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageParam, ChatCompletionToolChoiceOption } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reasoningParserNamed, toolParserNamed } from "../../backends/answer-parsers.js";
import type { Call, ChatMessage } from "../../core/types.js";
import { CHATML_CONTROL, LLAMA31_LIKE_TEMPLATE, LLAMA3_CONTROL, QWEN25_LIKE_TEMPLATE, QWEN3_LIKE_TEMPLATE, QWEN_ADDED } from "../../testing/chat-template-fixtures.js";
import { arborChatModel, jinjaChatModel, templateBackend, type ChatModel, type ScriptedTurn, type TemplateBackend } from "../../testing/template-backend.js";
import { CHATML_TOOLS_TEMPLATE as MADE_CHATML_TEMPLATE, LLAMA3_TOOLS_TEMPLATE as MADE_LLAMA3_TEMPLATE } from "../../model/made/templates.js";
import { createGateway, type Gateway } from "../server.js";
import { RESET_REASONS } from "./context-prompt.js";

const TOOL = (name: string, description: string) => ({ type: "function" as const, function: { name, description, parameters: { type: "object", properties: { q: { type: "string" } } } } });
const TOOL_SETS = [[TOOL("calc", "Evaluate arithmetic."), TOOL("search", "Search the notes.")], [TOOL("calc", "Evaluate arithmetic.")], []];

interface Served {
  model: ChatModel;
  backend: TemplateBackend;
  gateway: Gateway;
  url: string;
  calls: Call[];
}

const served = new Map<string, Served>();

async function serve(key: string, model: ChatModel, parsers: Pick<Parameters<typeof templateBackend>[0], "toolParser" | "reasoningParser">): Promise<void> {
  const backend = templateBackend({ name: key, model, ...parsers });
  const calls: Call[] = [];
  const gateway = createGateway({ backends: [backend], sink: { recordCall: async (c) => void calls.push(c) } });
  const url = await gateway.listen("127.0.0.1", 0);
  served.set(key, { model, backend, gateway, url, calls });
}

beforeAll(async () => {
  const think = reasoningParserNamed("think", "test");
  await serve("arbor", arborChatModel(), { toolParser: toolParserNamed("arbor", "test") });
  await serve("qwen2.5-like", jinjaChatModel("qwen2.5-like", QWEN25_LIKE_TEMPLATE, CHATML_CONTROL, QWEN_ADDED, ["<|im_end|>"]), { toolParser: toolParserNamed("hermes", "test"), reasoningParser: think });
  await serve("llama3.1-like", jinjaChatModel("llama3.1-like", LLAMA31_LIKE_TEMPLATE, LLAMA3_CONTROL, [], ["<|eot_id|>", "<|eom_id|>"]), { toolParser: toolParserNamed("llama3_json", "test") });
  // The shipped made-here models' templates (src/model/made/templates.ts).
  await serve("made-bpe-chatml", jinjaChatModel("made-bpe-chatml", MADE_CHATML_TEMPLATE, CHATML_CONTROL, QWEN_ADDED, ["<|im_end|>"]), { toolParser: toolParserNamed("hermes", "test"), reasoningParser: think });
  await serve("made-spm-llama3", jinjaChatModel("made-spm-llama3", MADE_LLAMA3_TEMPLATE, LLAMA3_CONTROL, [], ["<|eot_id|>", "<|eom_id|>"]), { toolParser: toolParserNamed("llama3_json", "test") });
  await serve("qwen3-like", jinjaChatModel("qwen3-like", QWEN3_LIKE_TEMPLATE, CHATML_CONTROL, QWEN_ADDED, ["<|im_end|>"]), { toolParser: toolParserNamed("hermes", "test"), reasoningParser: think });
});

afterAll(async () => {
  for (const s of served.values()) await s.gateway.close();
});

/** One model turn the test scripts, and how the client asks for it. */
interface Step {
  turn: ScriptedTurn;
  stream: boolean;
  /** Force the turn's (first) call: "required", or by name. */
  force?: "required" | "named";
}

// Text with the characters that trouble templates and parsers: quotes, braces, angle brackets, newlines, non-ASCII.
const text = fc.string({ unit: fc.constantFrom(..."ab xy\n{}\"'<>/:,é😀"), maxLength: 12 });
const args = fc.dictionary(fc.constantFrom("q", "n", "deep key"), fc.oneof(text, fc.integer({ min: -5, max: 99 }), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 2 })), { maxKeys: 2 });

/** A conversation: episodes of (tool set, user text, tool rounds, final answer). */
const conversation = fc.array(
  fc.record({
    toolSet: fc.constantFrom(0, 0, 0, 1, 2),
    user: text,
    rounds: fc.array(
      fc.record({
        content: fc.oneof(fc.constant(""), fc.constant(""), text),
        reasoning: fc.option(text, { nil: undefined }),
        calls: fc.array(fc.record({ name: fc.constantFrom("calc", "search"), args }), { minLength: 1, maxLength: 2 }),
        results: fc.array(text, { minLength: 2, maxLength: 2 }),
        stream: fc.boolean(),
        force: fc.constantFrom(undefined, undefined, "required" as const, "named" as const),
      }),
      { maxLength: 2 },
    ),
    answer: fc.record({ content: text, reasoning: fc.option(text, { nil: undefined }), stream: fc.boolean() }),
  }),
  { minLength: 1, maxLength: 3 },
);

type Episodes = typeof conversation extends fc.Arbitrary<infer T> ? T : never;
type Round = Episodes[number]["rounds"][number];

function openAiMessages(messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  return messages.map((m): ChatCompletionMessageParam => {
    if (m.role === "tool") return { role: "tool", content: m.content, tool_call_id: m.toolCallId as string };
    if (m.role === "assistant") {
      const out: Record<string, unknown> = { role: "assistant", content: m.toolCalls?.length && m.content === "" ? null : m.content };
      if (m.toolCalls?.length) out.tool_calls = m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      if (m.reasoning !== undefined) out.reasoning_content = m.reasoning;
      return out as unknown as ChatCompletionMessageParam;
    }
    return { role: m.role, content: m.content } as ChatCompletionMessageParam;
  });
}

let programs = 0;

/** Drive one conversation on `key`; returns every call's verdict. */
async function drive(key: string, episodes: Episodes): Promise<{ resets: string[]; continued: number }> {
  const s = served.get(key) as Served;
  const programId = `${key}-${programs++}`;
  const client = new OpenAI({ baseURL: `${s.url}/p/${programId}/v1`, apiKey: "unused", maxRetries: 0 });
  const messages: ChatMessage[] = [{ role: "system", content: "Be brief." }];
  const verdicts = { resets: [] as string[], continued: 0 };
  for (const ep of episodes) {
    const tools = TOOL_SETS[ep.toolSet] as ReturnType<typeof TOOL>[];
    const names = new Set(tools.map((t) => t.function.name));
    messages.push({ role: "user", content: ep.user });
    const steps: Step[] = [];
    for (const r of ep.rounds) {
      // Llama 3.1's template takes one call per turn, and drops the content of a turn with a call.
      const llama = key.includes("llama3");
      const calls = r.calls
        .filter((c) => names.has(c.name))
        .slice(0, key === "llama3.1-like" ? 1 : undefined)
        .map((c) => ({ name: c.name, arguments: JSON.stringify(c.args) }));
      if (calls.length === 0) continue;
      // A forced call's opening leaves no room for content or reasoning before the call.
      const forced = r.force !== undefined && r.content === "" && r.reasoning === undefined;
      steps.push({ turn: { content: llama ? "" : r.content, toolCalls: calls, ...(r.reasoning !== undefined ? { reasoning: r.reasoning } : {}) }, stream: r.stream, ...(forced ? { force: r.force } : {}) });
    }
    steps.push({ turn: { content: ep.answer.content, ...(ep.answer.reasoning !== undefined ? { reasoning: ep.answer.reasoning } : {}) }, stream: ep.answer.stream });
    for (const [k, step] of steps.entries()) {
      const history = messages.map((m) => ({ ...m }));
      s.backend.script({ history, ...(tools.length > 0 ? { tools } : {}), turn: step.turn });
      const before = s.calls.length;
      const toolChoice: ChatCompletionToolChoiceOption | undefined =
        step.force === "required" ? "required" : step.force === "named" ? { type: "function", function: { name: step.turn.toolCalls?.[0]?.name as string } } : undefined;
      const body: ChatCompletionCreateParamsNonStreaming = {
        model: "m",
        messages: openAiMessages(history),
        max_tokens: 4000,
        ...(tools.length > 0 ? { tools } : {}),
        ...(toolChoice ? { tool_choice: toolChoice } : {}),
      };
      let message: { content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[]; reasoning_content?: string };
      if (step.stream) {
        let reasoning = "";
        const stream = client.chat.completions.stream({ ...body, stream: true });
        // The SDK keeps only the last reasoning delta: the client adds them up itself.
        stream.on("chunk", (c) => void (reasoning += (c.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ""));
        const done = await stream.finalChatCompletion();
        message = { ...(done.choices[0]?.message as typeof message) };
        if (reasoning !== "") message.reasoning_content = reasoning;
        else delete message.reasoning_content;
      } else {
        const res = await client.chat.completions.create(body);
        message = res.choices[0]?.message as typeof message;
      }
      expect(s.calls.length, "one recorded call per request").toBe(before + 1);
      const call = s.calls.at(-1) as Call;
      // The property: the recorded prompt is the template's render of the full conversation, or a reset with its reason.
      const forcedName = step.force === "named" ? (step.turn.toolCalls?.[0]?.name as string) : undefined;
      const prefill = step.force ? toolParserNamed(key === "arbor" ? "arbor" : key.includes("llama3") ? "llama3_json" : "hermes", "test").prefill(forcedName) : "";
      const expected = [...s.model.render(history, true, tools.length > 0 ? tools : undefined), ...s.model.encode(prefill, true)];
      if (call.contextReset) {
        expect(Object.values(RESET_REASONS)).toContain(call.contextResetReason);
        verdicts.resets.push(call.contextResetReason as string);
      } else {
        expect(call.promptTokenIds, `call ${call.index} of ${programId} continued a context the template renders differently`).toEqual(expected);
        if (call.index > 0) verdicts.continued++;
      }
      if (call.index === 0) expect(call.promptTokenIds).toEqual(expected);
      // The answer's calls are read out with the backend's parser, streamed or not.
      expect(message.tool_calls?.length ?? 0).toBe(step.turn.toolCalls?.length ?? 0);
      const sent: ChatMessage = {
        role: "assistant",
        content: message.content ?? "",
        ...(message.tool_calls?.length ? { toolCalls: message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
        ...(message.reasoning_content !== undefined ? { reasoning: message.reasoning_content } : {}),
      };
      messages.push(sent);
      const round = ep.rounds.filter((r: Round) => r.calls.some((c) => names.has(c.name)))[k];
      for (const [i, c] of (sent.toolCalls ?? []).entries()) messages.push({ role: "tool", content: round?.results[i % 2] ?? "ok", toolCallId: c.id });
    }
  }
  return verdicts;
}

describe("token-path prompts equal the template's full render, or record contextReset with a reason", () => {
  for (const key of ["arbor", "qwen2.5-like", "qwen3-like", "llama3.1-like", "made-bpe-chatml", "made-spm-llama3"]) {
    it(`${key}: random multi-turn tool conversations, streamed and not`, async () => {
      const totals = { continued: 0, resets: new Map<string, number>() };
      await fc.assert(
        fc.asyncProperty(conversation, async (episodes) => {
          const v = await drive(key, episodes);
          totals.continued += v.continued;
          for (const r of v.resets) totals.resets.set(r, (totals.resets.get(r) ?? 0) + 1);
        }),
        { numRuns: 25, seed: 14 },
      );
      console.log(`${key}: ${totals.continued} calls continued, resets ${JSON.stringify(Object.fromEntries(totals.resets))}`);
      // Not a test that passes by resetting everything: most calls continue their context. Except
      // on the made-here ChatML template, which writes reasoning_content between newlines without
      // stripping it (Qwen3's strips) while the think parser keeps the newlines it read (as vLLM's
      // does): every turn with reasoning then re-renders differently (see the test below).
      const resets = [...totals.resets.values()].reduce((a, b) => a + b, 0);
      if (key === "made-bpe-chatml") expect(totals.continued).toBeGreaterThan(0);
      else expect(totals.continued).toBeGreaterThan(resets);
    }, 120_000);
  }

  const call = (name: "calc" | "search", q: string): Round => ({
    content: "",
    reasoning: undefined,
    calls: [{ name, args: { q } }],
    results: ["r1", "r2"],
    stream: false,
    force: undefined,
  });

  it("qwen2.5-like: a tool loop of calls without content continues the context at every call", async () => {
    const v = await drive("qwen2.5-like", [
      { toolSet: 0, user: "hi", rounds: [call("calc", "1+1"), { ...call("search", "x"), stream: true }], answer: { content: "done", reasoning: undefined, stream: false } },
      { toolSet: 0, user: "again", rounds: [{ ...call("calc", "2"), force: "named" }], answer: { content: "ok", reasoning: undefined, stream: true } },
    ]);
    expect(v.resets).toEqual([]);
    expect(v.continued).toBe(4);
  });

  it("qwen2.5-like: tools that change rewrite the system turn — a reset for that reason", async () => {
    const v = await drive("qwen2.5-like", [
      { toolSet: 0, user: "hi", rounds: [call("calc", "1")], answer: { content: "a", reasoning: undefined, stream: false } },
      { toolSet: 1, user: "next", rounds: [call("calc", "2")], answer: { content: "b", reasoning: undefined, stream: false } },
    ]);
    expect(v.resets).toEqual(["tools changed"]);
  });

  it("qwen3-like: reasoning continues through a tool loop, and is dropped from earlier turns once a new query follows — a reset", async () => {
    const v = await drive("qwen3-like", [
      { toolSet: 0, user: "hi", rounds: [{ ...call("calc", "1"), reasoning: "let me add" }], answer: { content: "2", reasoning: "so two", stream: true } },
      { toolSet: 0, user: "and now?", rounds: [], answer: { content: "3", reasoning: "three", stream: false } },
    ]);
    expect(v.resets).toEqual(["template re-renders earlier turns"]);
    expect(v.continued).toBe(1);
  });

  it("made-bpe-chatml: a tool loop continues, with and without reasoning (the template strips it as Qwen3's does)", async () => {
    const plain = await drive("made-bpe-chatml", [{ toolSet: 0, user: "hi", rounds: [call("calc", "1")], answer: { content: "2", reasoning: undefined, stream: true } }]);
    expect(plain).toEqual({ resets: [], continued: 1 });
    const reasoned = await drive("made-bpe-chatml", [{ toolSet: 0, user: "hi", rounds: [{ ...call("calc", "1"), reasoning: "add" }], answer: { content: "2", reasoning: undefined, stream: false } }]);
    expect(reasoned).toEqual({ resets: [], continued: 1 });
  });

  it("arbor: forced calls and tool loops continue the context", async () => {
    const v = await drive("arbor", [
      { toolSet: 0, user: "hi", rounds: [{ ...call("calc", "1"), force: "required" }, { ...call("search", "2"), force: "named", stream: true }], answer: { content: "done", reasoning: undefined, stream: false } },
    ]);
    expect(v.resets).toEqual([]);
    expect(v.continued).toBe(2);
  });
});
