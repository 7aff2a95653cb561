import { describe, expect, it } from "vitest";
import type { TokenizeRequest, TokenizeResult } from "../../backends/backend.js";
import type { ChatMessage } from "../../core/types.js";
import { buildPrompt, extendsConversation, type ProgramContext } from "./context-prompt.js";

// A toy engine tokenizer: one token per character (code + 100); template <s>=1, roles 2-4, <|end|>=5.
const ROLE = { system: 2, user: 3, assistant: 4, tool: 6 } as const;
const text = (s: string): number[] => [...s].map((c) => c.charCodeAt(0) + 100);
const requests: TokenizeRequest[] = [];
async function tokenize(req: TokenizeRequest): Promise<TokenizeResult> {
  requests.push(req);
  if ("text" in req) return { tokens: [...(req.addSpecialTokens ? [1] : []), ...text(req.text)], maxModelLen: 500 };
  const ids = [1];
  for (const m of req.messages) ids.push(ROLE[m.role], ...text(m.content), 5);
  if (req.addGenerationPrompt) ids.push(4);
  return { tokens: ids, maxModelLen: 500 };
}

const user = (content: string): ChatMessage => ({ role: "user", content });
const assistant = (content: string): ChatMessage => ({ role: "assistant", content });

function chatContext(messages: ChatMessage[], output: number[], outputText: string, finishReason: ProgramContext["finishReason"]): ProgramContext {
  return { endpoint: "chat", messages, promptTokenIds: [1, 3, ...text(messages[0]!.content), 5, 4], outputTokenIds: output, outputText, finishReason };
}

describe("buildPrompt", () => {
  it("tokenizes a first call whole", async () => {
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi")] }, undefined, tokenize);
    expect(p).toEqual({ promptTokenIds: [1, 3, ...text("hi"), 5, 4], contextReset: false, maxModelLen: 500 });
  });

  it("continues from the previous prompt and the engine's own output ids (not the re-tokenized answer)", async () => {
    // The engine produced ids 900, 901 for "ok" and stopped on <|end|> (5): different ids than text("ok").
    const prev = chatContext([user("hi")], [900, 901, 5], "ok", "stop");
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok"), user("more")] }, prev, tokenize);
    expect(p.contextReset).toBe(false);
    expect(p.promptTokenIds).toEqual([...prev.promptTokenIds, 900, 901, 5, 3, ...text("more"), 5, 4]);
  });

  it("closes a cut-off answer with the template's turn ending", async () => {
    const prev = chatContext([user("hi")], [900, 901], "ok", "length");
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok"), user("go")] }, prev, tokenize);
    expect(p.promptTokenIds).toEqual([...prev.promptTokenIds, 900, 901, 5, 3, ...text("go"), 5, 4]);
  });

  it("resets (tokenizing whole) when the client edited or dropped history", async () => {
    const prev = chatContext([user("hi")], [900, 5], "o", "stop");
    for (const messages of [[user("HI"), assistant("o"), user("x")], [user("hi"), assistant("changed"), user("x")], [user("x")], [user("hi")]]) {
      const p = await buildPrompt({ endpoint: "chat", messages }, prev, tokenize);
      expect(p).toEqual({ promptTokenIds: (await tokenize({ messages, addGenerationPrompt: true })).tokens, contextReset: true, maxModelLen: 500 });
    }
  });

  it("continues completions text by tokenizing only the added suffix, and takes token prompts as given", async () => {
    const prev: ProgramContext = { endpoint: "completions", messages: [user("1+1=")], promptTokenIds: [1, ...text("1+1=")], outputTokenIds: [950], outputText: "2", finishReason: "length" };
    const cont = await buildPrompt({ endpoint: "completions", prompt: "1+1=2 3+3=" }, prev, tokenize);
    expect(cont).toEqual({ promptTokenIds: [...prev.promptTokenIds, 950, ...text(" 3+3=")], contextReset: false, maxModelLen: 500 });
    // An identical re-send is a fresh sample.
    const again = await buildPrompt({ endpoint: "completions", prompt: "1+1=2" }, prev, tokenize);
    expect(again).toEqual({ promptTokenIds: [1, ...text("1+1=2")], contextReset: true, maxModelLen: 500 });
    const ids = await buildPrompt({ endpoint: "completions", prompt: [...prev.promptTokenIds, 950, 7] }, prev, tokenize);
    expect(ids).toEqual({ promptTokenIds: [...prev.promptTokenIds, 950, 7], contextReset: false, maxModelLen: null });
    expect((await buildPrompt({ endpoint: "completions", prompt: [7] }, prev, tokenize)).contextReset).toBe(true);
  });

  it("renders tool definitions with every chat tokenize, and resets when they change", async () => {
    const tools = [{ type: "function", function: { name: "calc" } }];
    requests.length = 0;
    const prev = { ...chatContext([user("hi")], [900, 5], "o", "stop"), tools };
    const same = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("o"), user("x")], tools }, prev, tokenize);
    expect(same.contextReset).toBe(false);
    expect(requests.map((r) => ("messages" in r ? r.tools : "text"))).toEqual([tools, tools]);
    const other = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("o"), user("x")] }, prev, tokenize);
    expect(other.contextReset).toBe(true);
  });

  it("passes the caller's signal to every tokenize request", async () => {
    const ac = new AbortController();
    requests.length = 0;
    const prev = chatContext([user("hi")], [900], "o", "length");
    await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("o"), user("x")] }, prev, tokenize, ac.signal);
    expect(requests.length).toBe(4);
    expect(requests.every((r) => r.signal === ac.signal)).toBe(true);
  });
});

describe("buildPrompt with tool calls", () => {
  const tools = [{ type: "function", function: { name: "calc" } }];
  const call = { id: "call_1", name: "calc", arguments: '{"x": 1}' };
  const asked = (content: string, toolCalls = [call]): ChatMessage => ({ role: "assistant", content, toolCalls });
  const result: ChatMessage = { role: "tool", content: "2", toolCallId: "call_1" };
  // The engine's ids for "ok" + the call differ from any re-render: only the gateway's read-out answer can match.
  const prev: ProgramContext = { ...chatContext([user("hi")], [900, 901, 5], "ok<call>", "stop"), tools, answer: { content: "ok", toolCalls: [call] } };

  it("continues when the agent sends back the answer's tool calls (arguments as JSON values, ids its own)", async () => {
    for (const sent of [asked("ok"), asked("ok", [{ ...call, id: "other", arguments: '{"x":1}' }])]) {
      const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), sent, result], tools }, prev, tokenize);
      expect(p.contextReset).toBe(false);
      expect(p.promptTokenIds).toEqual([...prev.promptTokenIds, 900, 901, 5, 6, ...text("2"), 5, 4]);
    }
  });

  it("resets when the calls sent back differ from the answer's", async () => {
    for (const sent of [asked("ok", []), asked("ok", [{ ...call, arguments: '{"x":2}' }]), asked("ok", [call, call]), asked("ok!")]) {
      const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), sent, result], tools }, prev, tokenize);
      expect(p.contextReset).toBe(true);
    }
  });

  it("without a read-out answer, continues only when the turn re-renders to exactly the engine's ids", async () => {
    // The toy template renders tool calls as nothing: "ok" + <|end|> re-renders to these ids.
    const relayed: ProgramContext = { ...chatContext([user("hi")], [...text("ok"), 5], "ok", "stop"), tools };
    const same = await buildPrompt({ endpoint: "chat", messages: [user("hi"), asked("ok"), result], tools }, relayed, tokenize);
    expect(same).toEqual({ promptTokenIds: [...relayed.promptTokenIds, ...text("ok"), 5, 6, ...text("2"), 5, 4], contextReset: false, maxModelLen: 500 });
    const other: ProgramContext = { ...relayed, outputTokenIds: [900, 901, 5] };
    expect((await buildPrompt({ endpoint: "chat", messages: [user("hi"), asked("ok"), result], tools }, other, tokenize)).contextReset).toBe(true);
  });

  it("earlier tool calls and tool_call_ids must be unchanged", () => {
    const history = [user("hi"), asked("ok"), result];
    const ctx: ProgramContext = { ...chatContext(history, [], "done", "stop"), tools };
    expect(extendsConversation(ctx, [...history, assistant("done")])).toBe(true);
    expect(extendsConversation(ctx, [user("hi"), asked("ok", [{ ...call, id: "x" }]), result, assistant("done")])).toBe(false);
    expect(extendsConversation(ctx, [user("hi"), asked("ok"), { ...result, toolCallId: "x" }, assistant("done")])).toBe(false);
  });

  it("asks for the forced call's opening only in the render it generates from", async () => {
    requests.length = 0;
    await buildPrompt({ endpoint: "chat", messages: [user("hi"), asked("ok"), result], tools, toolChoice: "required" }, prev, tokenize);
    const chats = requests.filter((r): r is Extract<TokenizeRequest, { messages: unknown }> => "messages" in r);
    expect(chats.map((r) => [r.addGenerationPrompt, r.toolChoice])).toEqual([
      [true, "required"],
      [false, undefined],
    ]);
    requests.length = 0;
    await buildPrompt({ endpoint: "chat", messages: [user("x")], tools, toolChoice: "required" }, undefined, tokenize);
    expect(requests.map((r) => ("messages" in r ? r.toolChoice : null))).toEqual(["required"]);
  });
});

describe("extendsConversation", () => {
  it("needs the previous messages unchanged (names too), then the answer as the assistant turn", () => {
    const prev = chatContext([{ role: "tool", content: "4", name: "calc" }], [], "ok", "stop");
    expect(extendsConversation(prev, [{ role: "tool", content: "4", name: "calc" }, assistant("ok")])).toBe(true);
    expect(extendsConversation(prev, [{ role: "tool", content: "4" }, assistant("ok")])).toBe(false);
    expect(extendsConversation(prev, [{ role: "tool", content: "4", name: "calc" }, user("ok")])).toBe(false);
  });
});
