import { describe, expect, it } from "vitest";
import { createCalcEnvironment } from "../envs/calc/calc.js";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import { renderChat, stopTokenIds } from "../model/chat-template.js";
import { Vocab } from "../model/vocab.js";
import { goldenSample } from "./golden-samples.js";

const vocab = new Vocab();
const env = createCalcEnvironment();
const tokenize = (t: string): number[] => vocab.encode(t);
const arbor = { format: new ArborChatFormat(vocab), stopIds: stopTokenIds(vocab) };

/** Maximal runs of loss-mask 1, decoded. */
function lossSpans(tokenIds: number[], lossMask: number[]): string[] {
  const spans: string[] = [];
  let cur: number[] = [];
  tokenIds.forEach((t, i) => {
    if (lossMask[i] === 1) cur.push(t);
    else if (cur.length > 0) {
      spans.push(vocab.decode(cur));
      cur = [];
    }
  });
  if (cur.length > 0) spans.push(vocab.decode(cur));
  return spans;
}

describe("goldenSample", () => {
  it("puts the loss on exactly the assistant turns and the <|end|> that stops each", () => {
    for (const task of env.tasks(10, 3)) {
      const golden = env.golden(task);
      const s = goldenSample(golden, arbor);
      expect(s.tokenIds).toEqual(renderChat(golden, tokenize, vocab, { addGenerationPrompt: false }));
      expect(s.lossMask).toHaveLength(s.tokenIds.length);
      const expr = task.meta.expression as string;
      expect(lossSpans(s.tokenIds, s.lossMask)).toEqual([`<|tool_call|>calc ${expr}<|/tool_call|><|end|>`, `Answer: ${task.meta.answer as number}<|end|>`]);
    }
  });

  it("is, call by call, the engine's prompt followed by what the policy should answer", () => {
    const golden = env.golden(env.tasks(1, 9)[0]!);
    const s = goldenSample(golden, arbor);
    const end = vocab.controlId("<|end|>");
    // Call 1: the prompt the agent sends first (system + user, then <|assistant|>).
    const call1 = renderChat(golden.slice(0, 2), tokenize, vocab);
    expect(s.tokenIds.slice(0, call1.length)).toEqual(call1);
    expect(s.lossMask.slice(0, call1.length).every((m) => m === 0)).toBe(true);
    expect(s.lossMask[call1.length]).toBe(1);
    // Call 2 sees the tool's result; its prompt is masked except for call 1's answer.
    const call2 = renderChat(golden.slice(0, 4), tokenize, vocab);
    expect(s.tokenIds.slice(0, call2.length)).toEqual(call2);
    expect(s.tokenIds.at(-1)).toBe(end);
    expect(s.lossMask.at(-1)).toBe(1);
    // The tool-call markers are the policy's control tokens, as the engine samples them.
    expect(s.tokenIds[call1.length]).toBe(vocab.controlId("<|tool_call|>"));
  });

  it("refuses a conversation with nothing to learn", () => {
    expect(() => goldenSample([{ role: "user", content: "hi" }], arbor)).toThrow(/no assistant turn/);
  });
});

describe("goldenSample with a made-here BPE + ChatML model and native tool calls", () => {
  it("renders the calc tool as the engine declares it, and puts the loss on each turn up to <|im_end|>", async () => {
    const { sftModelOf } = await import("./sft-model.js");
    const { nativeConversation } = await import("../envs/native-tools.js");
    const { fromEnvTool } = await import("../agents/agent-tool.js");
    const { declaredToolSpecs } = await import("../agents/tool-modes.js");
    const { tokenizerFromSpec } = await import("../model/made/tokenizer-from-spec.js");
    const model = sftModelOf("bpe-chatml");
    const tok = tokenizerFromSpec(model.spec);
    const tools = declaredToolSpecs(env.tools().map(fromEnvTool));
    const task = env.tasks(1, 4)[0]!;
    const golden = nativeConversation(env, env.golden(task));
    const s = goldenSample(golden, { format: model.format, stopIds: model.stopIds, tools });
    const spans: string[] = [];
    let cur: number[] = [];
    s.tokenIds.forEach((t, i) => {
      if (s.lossMask[i] === 1) cur.push(t);
      else if (cur.length > 0) {
        spans.push(tok.decode(cur, { special: true }));
        cur = [];
      }
    });
    if (cur.length > 0) spans.push(tok.decode(cur, { special: true }));
    const expr = task.meta.expression as string;
    expect(spans).toEqual([`<tool_call>\n{"name": "calc", "arguments": {"input": "${expr}"}}\n</tool_call><|im_end|>`, `Answer: ${task.meta.answer as number}<|im_end|>`]);
    // Call 1's prompt is what the engine renders for the request (tools declared, generation prompt open).
    const call1 = model.format.render(golden.slice(0, 2), { addGenerationPrompt: true, tools });
    expect(s.tokenIds.slice(0, call1.length)).toEqual(call1);
    expect(tok.decode(call1, { special: true })).toContain("<tools>");
  });
});
