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
  // A continued final message's turn stays open.
  if (req.continueFinalMessage) ids.pop();
  if (req.addGenerationPrompt) ids.push(4);
  return { tokens: ids, maxModelLen: 500 };
}

// The toy engine's detokenizer: characters back, the ids 900/901 it generates for "o"/"k", specials as nothing.
async function detokenize(ids: number[]): Promise<string> {
  return ids.map((id) => (id === 900 ? "o" : id === 901 ? "k" : id >= 100 ? String.fromCharCode(id - 100) : "")).join("");
}
const engine = { tokenize, detokenize };

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
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok"), user("more")] }, prev, engine);
    expect(p.contextReset).toBe(false);
    expect(p.promptTokenIds).toEqual([...prev.promptTokenIds, 900, 901, 5, 3, ...text("more"), 5, 4]);
  });

  it("closes a cut-off answer with the template's turn ending", async () => {
    const prev = chatContext([user("hi")], [900, 901], "ok", "length");
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok"), user("go")] }, prev, engine);
    expect(p.promptTokenIds).toEqual([...prev.promptTokenIds, 900, 901, 5, 3, ...text("go"), 5, 4]);
  });

  it("without a detokenizer, engine ids that differ from the re-render cannot be compared: a reset", async () => {
    const prev = chatContext([user("hi")], [900, 901, 5], "ok", "stop");
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok"), user("more")] }, prev, tokenize);
    expect(p).toMatchObject({ contextReset: true, contextResetReason: "template re-renders earlier turns" });
  });

  it("takes the full render when the previous prompt and answer re-render to exactly the engine's ids, with that one render", async () => {
    const prev = chatContext([user("hi")], [...text("ok"), 5], "ok", "stop");
    const messages = [user("hi"), assistant("ok"), user("more")];
    requests.length = 0;
    const p = await buildPrompt({ endpoint: "chat", messages }, prev, tokenize);
    // The full render starts with the previous prompt and output ids: no render up to the answer is asked for.
    expect(requests).toEqual([{ messages, addGenerationPrompt: true, signal: undefined }]);
    expect(p).toEqual({ promptTokenIds: (await tokenize({ messages, addGenerationPrompt: true })).tokens, contextReset: false, maxModelLen: 500 });
  });

  it("renders up to the answer only when the full render does not start with the engine's ids", async () => {
    // The engine's ids for "ok" (900, 901) differ from the re-render's: the render up to the answer is compared.
    const prev = chatContext([user("hi")], [900, 901, 5], "ok", "stop");
    const messages = [user("hi"), assistant("ok"), user("more")];
    requests.length = 0;
    const full = { messages, addGenerationPrompt: true, signal: undefined };
    const upToAnswer = { messages: messages.slice(0, 2), addGenerationPrompt: false, signal: undefined };
    const p = await buildPrompt({ endpoint: "chat", messages }, prev, engine);
    expect(requests.slice(0, 2)).toEqual([full, upToAnswer]);
    expect(p).toMatchObject({ contextReset: false, answerRendered: true });
    // Told the last prompt needed it, the builder asks for both renders at once (before the full one answers), same prompt.
    requests.length = 0;
    let inFlight = 0;
    let most = 0;
    const counting = async (req: TokenizeRequest): Promise<TokenizeResult> => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 1));
      inFlight--;
      return tokenize(req);
    };
    const again = await buildPrompt({ endpoint: "chat", messages }, { ...prev, answerRenderNeeded: true }, { tokenize: counting, detokenize });
    expect(requests.slice(0, 2)).toEqual([upToAnswer, full]);
    expect(most).toBe(2);
    expect(again).toEqual(p);
  });

  it("resets when the stop token the engine ended on is not the template's turn ending", async () => {
    // A stop string's token (777) ended the answer; the template ends the turn with <|end|> (5).
    const prev = chatContext([user("hi")], [900, 901, 777], "ok", "stop");
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok"), user("more")] }, prev, engine);
    expect(p).toMatchObject({ contextReset: true, contextResetReason: "template re-renders earlier turns" });
  });

  it("resets (tokenizing whole) when the client edited or dropped history", async () => {
    const prev = chatContext([user("hi")], [900, 5], "o", "stop");
    // The answer's case is found by comparing with the render up to the answer (so the result says it was needed).
    const cases: [ChatMessage[], string, object][] = [
      [[user("HI"), assistant("o"), user("x")], "history differs", {}],
      [[user("hi"), assistant("changed"), user("x")], "answer differs from the engine's output", { answerRendered: true }],
      [[user("x")], "history differs", {}],
      [[user("hi")], "history differs", {}],
    ];
    for (const [messages, reason, rendered] of cases) {
      const p = await buildPrompt({ endpoint: "chat", messages }, prev, engine);
      expect(p).toEqual({ promptTokenIds: (await tokenize({ messages, addGenerationPrompt: true })).tokens, contextReset: true, contextResetReason: reason, maxModelLen: 500, ...rendered });
    }
  });

  it("continues completions text by tokenizing only the added suffix, and takes token prompts as given", async () => {
    const prev: ProgramContext = { endpoint: "completions", messages: [user("1+1=")], promptTokenIds: [1, ...text("1+1=")], outputTokenIds: [950], outputText: "2", finishReason: "length" };
    const cont = await buildPrompt({ endpoint: "completions", prompt: "1+1=2 3+3=" }, prev, tokenize);
    expect(cont).toEqual({ promptTokenIds: [...prev.promptTokenIds, 950, ...text(" 3+3=")], contextReset: false, maxModelLen: 500 });
    // An identical re-send is a fresh sample.
    const again = await buildPrompt({ endpoint: "completions", prompt: "1+1=2" }, prev, tokenize);
    expect(again).toEqual({ promptTokenIds: [1, ...text("1+1=2")], contextReset: true, contextResetReason: "prompt does not extend the previous context", maxModelLen: 500 });
    const ids = await buildPrompt({ endpoint: "completions", prompt: [...prev.promptTokenIds, 950, 7] }, prev, tokenize);
    expect(ids).toEqual({ promptTokenIds: [...prev.promptTokenIds, 950, 7], contextReset: false, maxModelLen: null });
    expect((await buildPrompt({ endpoint: "completions", prompt: [7] }, prev, tokenize)).contextReset).toBe(true);
  });

  it("renders tool definitions with every chat tokenize, and resets when they change", async () => {
    const tools = [{ type: "function", function: { name: "calc" } }];
    requests.length = 0;
    const prev = { ...chatContext([user("hi")], [900, 5], "o", "stop"), tools };
    const same = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("o"), user("x")], tools }, prev, engine);
    expect(same.contextReset).toBe(false);
    expect(requests.map((r) => ("messages" in r ? r.tools : "text")).slice(0, 2)).toEqual([tools, tools]);
    const other = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("o"), user("x")] }, prev, tokenize);
    expect(other).toMatchObject({ contextReset: true, contextResetReason: "tools changed" });
  });

  it("continues across a change of tools when the template renders the earlier turns exactly as before", async () => {
    // The toy template does not render tools: the previous prompt and answer re-render unchanged.
    const prev = { ...chatContext([user("hi")], [...text("o"), 5], "o", "stop"), tools: [{ type: "function", function: { name: "calc" } }] };
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("o"), user("x")] }, prev, tokenize);
    expect(p.contextReset).toBe(false);
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
      const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), sent, result], tools }, prev, engine);
      expect(p.contextReset).toBe(false);
      expect(p.promptTokenIds).toEqual([...prev.promptTokenIds, 900, 901, 5, 6, ...text("2"), 5, 4]);
    }
  });

  it("resets when the calls sent back differ from the answer's", async () => {
    for (const sent of [asked("ok", []), asked("ok", [{ ...call, arguments: '{"x":2}' }]), asked("ok", [call, call]), asked("ok!")]) {
      const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), sent, result], tools }, prev, engine);
      expect(p).toMatchObject({ contextReset: true, contextResetReason: "answer differs from the engine's output" });
    }
  });

  it("without a read-out answer, continues only when the turn re-renders to exactly the engine's ids", async () => {
    // The toy template renders tool calls as nothing: "ok" + <|end|> re-renders to these ids.
    const relayed: ProgramContext = { ...chatContext([user("hi")], [...text("ok"), 5], "ok", "stop"), tools };
    const same = await buildPrompt({ endpoint: "chat", messages: [user("hi"), asked("ok"), result], tools }, relayed, tokenize);
    expect(same).toEqual({ promptTokenIds: [...relayed.promptTokenIds, ...text("ok"), 5, 6, ...text("2"), 5, 4], contextReset: false, maxModelLen: 500 });
    const other: ProgramContext = { ...relayed, outputTokenIds: [900, 901, 5] };
    expect((await buildPrompt({ endpoint: "chat", messages: [user("hi"), asked("ok"), result], tools }, other, engine)).contextReset).toBe(true);
  });

  it("earlier tool calls and tool_call_ids must be unchanged", () => {
    const history = [user("hi"), asked("ok"), result];
    const ctx: ProgramContext = { ...chatContext(history, [], "done", "stop"), tools };
    expect(extendsConversation(ctx, [...history, assistant("done")])).toBe(true);
    expect(extendsConversation(ctx, [user("hi"), asked("ok", [{ ...call, id: "x" }]), result, assistant("done")])).toBe(false);
    expect(extendsConversation(ctx, [user("hi"), asked("ok"), { ...result, toolCallId: "x" }, assistant("done")])).toBe(false);
  });

  it("ends only the render it generates from with the forced call's opening, tokenized with special tokens read", async () => {
    requests.length = 0;
    const fresh = await buildPrompt({ endpoint: "chat", messages: [user("x")], tools, prefill: "<call>" }, undefined, tokenize);
    expect(fresh.promptTokenIds).toEqual([...(await tokenize({ messages: [user("x")], addGenerationPrompt: true })).tokens, ...text("<call>")]);
    requests.length = 0;
    await buildPrompt({ endpoint: "chat", messages: [user("hi"), asked("ok"), result], tools, prefill: "<call>" }, prev, engine);
    expect(requests.filter((r) => "text" in r)).toEqual([{ text: "<call>", addSpecialTokens: false, parseSpecial: true, signal: undefined }]);
  });
});

describe("buildPrompt continuing a final message", () => {
  const prefilled = [user("hi"), assistant("The")];

  it("renders the final turn open, with no generation prompt", async () => {
    const p = await buildPrompt({ endpoint: "chat", messages: prefilled, continueFinal: true }, undefined, engine);
    expect(p.promptTokenIds).toEqual([1, 3, ...text("hi"), 5, 4, ...text("The")]);
  });

  it("continues a cut-off answer sent back as the prefill on the engine's own ids, where they are the same text", async () => {
    // The engine wrote "ok" as 900, 901 (not text("ok")) and was cut off; the client continues "ok".
    const prev = chatContext([user("hi")], [900, 901], "ok", "length");
    const p = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok")], continueFinal: true }, prev, engine);
    expect(p).toMatchObject({ contextReset: false, promptTokenIds: [...prev.promptTokenIds, 900, 901] });
    // An answer that ended with its stop token closed its turn: continuing it is a new context.
    const stopped = chatContext([user("hi")], [900, 901, 5], "ok", "stop");
    const q = await buildPrompt({ endpoint: "chat", messages: [user("hi"), assistant("ok")], continueFinal: true }, stopped, engine);
    expect(q).toMatchObject({ contextReset: true, contextResetReason: "answer differs from the engine's output" });
  });
});

describe("extendsConversation reasoning", () => {
  it("needs the reasoning sent back to be the answer's", () => {
    const prev: ProgramContext = { ...chatContext([user("hi")], [], "ok", "stop"), answer: { content: "ok", toolCalls: [], reasoning: "think" } };
    expect(extendsConversation(prev, [user("hi"), { ...assistant("ok"), reasoning: "think" }])).toBe(true);
    expect(extendsConversation(prev, [user("hi"), assistant("ok")])).toBe(false);
    expect(extendsConversation(prev, [user("hi"), { ...assistant("ok"), reasoning: "other" }])).toBe(false);
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
