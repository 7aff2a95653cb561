import { describe, expect, it } from "vitest";
import { reasoningParserContract, splitPieces } from "./reasoning-parser.contract.js";
import { reasoningParserRegistry } from "./registry.js";

for (const name of reasoningParserRegistry.names()) {
  for (const startsInReasoning of [false, true]) reasoningParserContract(reasoningParserRegistry.create(name, { startsInReasoning }));
}

describe("think reasoning parser", () => {
  const qwen3 = reasoningParserRegistry.create("think");
  const r1 = reasoningParserRegistry.create("think", { startsInReasoning: true });

  it("splits Qwen3's answer as vLLM's qwen3 parser does, newlines kept", () => {
    expect(splitPieces(qwen3, "<think>\nThe user wants 2+2.\n</think>\n\n4")).toEqual({ reasoning: "\nThe user wants 2+2.\n", content: "\n\n4" });
    expect(splitPieces(qwen3, "4, no thinking")).toEqual({ reasoning: "", content: "4, no thinking" });
    // Only an answer that opens with <think> reasons; a stray tag later is content.
    expect(splitPieces(qwen3, "so </think> and <think>")).toEqual({ reasoning: "", content: "so </think> and <think>" });
    // Cut off by max_tokens inside the reasoning: still reasoning (as vLLM streams it).
    expect(splitPieces(qwen3, "<think>\nlong pla")).toEqual({ reasoning: "\nlong pla", content: "" });
  });

  it("with startsInReasoning (the prompt opened <think>) reads up to </think> as reasoning, and an unclosed answer as all reasoning", () => {
    expect(splitPieces(r1, "plan\n</think>\n\nanswer")).toEqual({ reasoning: "plan\n", content: "\n\nanswer" });
    expect(splitPieces(r1, "<think>plan</think>answer")).toEqual({ reasoning: "plan", content: "answer" });
    expect(splitPieces(r1, "still thinking")).toEqual({ reasoning: "still thinking", content: "" });
  });

  it("streams reasoning as it comes, holding back only what may be a tag", () => {
    const s = qwen3.stream();
    expect(s.push("<thi")).toEqual({ reasoning: "", content: "" });
    expect(s.push("nk>ab</th")).toEqual({ reasoning: "ab", content: "" });
    expect(s.push("ink>cd")).toEqual({ reasoning: "", content: "cd" });
    expect(s.flush()).toEqual({ reasoning: "", content: "" });
  });

  it("names the known parsers for an unknown name", () => {
    expect(reasoningParserRegistry.names()).toEqual(["none", "think"]);
    expect(() => reasoningParserRegistry.create("deepseek_v3")).toThrow("unknown reasoning parser 'deepseek_v3' (known: none, think)");
    expect(splitPieces(reasoningParserRegistry.create("none"), "<think>x</think>y")).toEqual({ reasoning: "", content: "<think>x</think>y" });
  });
});
