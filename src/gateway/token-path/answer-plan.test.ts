import { describe, expect, it } from "vitest";
import { reasoningParserNamed, toolParserNamed } from "../../backends/answer-parsers.js";
import { planTools } from "../../model/tool-markup.js";
import { AnswerReader, answerPlan, readAnswer, type AnswerPlan } from "./answer-plan.js";

const hermes = toolParserNamed("hermes", "test");
const think = reasoningParserNamed("think", "test");
const tools = planTools({ tools: [{ function: { name: "calc" } }] });

/** The answer streamed in two pieces cut at `cut`, added up. */
function streamed(text: string, plan: AnswerPlan, cut: number): { reasoning: string; content: string; calls: unknown[] } {
  const r = new AnswerReader(plan, "c");
  const steps = [r.push(text.slice(0, cut)), r.push(text.slice(cut)), r.flush()];
  return { reasoning: steps.map((s) => s.reasoning).join(""), content: steps.map((s) => s.content).join(""), calls: steps.flatMap((s) => s.calls) };
}

describe("answerPlan", () => {
  it("takes the backend's parsers, and a forced call's opening in the parser's format", () => {
    expect(answerPlan({ toolParser: hermes }, tools, "required").prefill).toBe("<tool_call>\n");
    expect(answerPlan({ toolParser: hermes }, tools, { type: "function", function: { name: "calc" } }).prefill).toBe('<tool_call>\n{"name": "calc", "arguments": ');
    expect(answerPlan({ toolParser: toolParserNamed("arbor", "t") }, tools, "required").prefill).toBe("<|tool_call|>");
    // tool_choice "none": tools are declared but calls stay text; no parser, no tools read.
    expect(answerPlan({ toolParser: hermes }, planTools({ tools: [{ function: { name: "calc" } }], tool_choice: "none" }), "none").tools).toBeUndefined();
    expect(answerPlan({}, tools, "required")).toEqual({});
    expect(answerPlan({ reasoningParser: think }, undefined, undefined)).toEqual({ reasoning: think });
  });
});

describe("AnswerReader and readAnswer", () => {
  const plan = answerPlan({ toolParser: hermes, reasoningParser: think }, tools, undefined);

  it("reads reasoning, then calls; whitespace between the reasoning and a first call is no content", () => {
    const text = '<think>\nadd them\n</think>\n\n<tool_call>\n{"name": "calc", "arguments": {"x": 1}}\n</tool_call>';
    const whole = readAnswer(text, "stop", plan, "c");
    expect(whole).toEqual({
      message: { role: "assistant", content: null, reasoning_content: "\nadd them\n", tool_calls: [{ id: "c_0", type: "function", function: { name: "calc", arguments: '{"x": 1}' } }] },
      finishReason: "tool_calls",
    });
    for (let cut = 0; cut <= text.length; cut++) {
      expect(streamed(text, plan, cut)).toEqual({ reasoning: "\nadd them\n", content: "", calls: whole.message.tool_calls });
    }
  });

  it("keeps leading whitespace of an answer without calls, and content before a call", () => {
    for (const [text, content] of [
      ["<think>r</think>\n\nIt is 4.", "\n\nIt is 4."],
      ["  ", "  "],
      ['Sure.\n<tool_call>\n{"name": "calc", "arguments": {}}\n</tool_call>', "Sure."],
    ] as const) {
      expect(readAnswer(text, "stop", plan, "c").message.content).toBe(content);
      for (let cut = 0; cut <= text.length; cut++) expect(streamed(text, plan, cut).content).toBe(content);
    }
  });
});
