import { describe, expect, it } from "vitest";
import { reasoningTokenCount } from "./reasoning-tokens.js";
import { createThinkParser } from "./think-parser.js";

// Ids 1 and 2 are `<think>` and `</think>`; 9 a stand-in for any other token.
const markers = { open: [1], close: [2] };
const qwen3 = createThinkParser();
const r1 = createThinkParser({ startsInReasoning: true });

describe("reasoningTokenCount", () => {
  it("counts the tokens between the markers, not the markers", () => {
    expect(reasoningTokenCount(qwen3, [1, 9, 9, 9, 2, 9, 9], markers)).toBe(3);
    expect(reasoningTokenCount(qwen3, [1, 2, 9], markers)).toBe(0);
  });

  it("counts a reasoning cut off before its close to the end", () => {
    expect(reasoningTokenCount(qwen3, [1, 9, 9], markers)).toBe(2);
  });

  it("counts nothing for an answer that does not open with the reasoning, as the parser splits it", () => {
    expect(reasoningTokenCount(qwen3, [9, 1, 9, 2, 9], markers)).toBe(0);
    expect(reasoningTokenCount(qwen3, [], markers)).toBe(0);
  });

  it("counts from the start where the generation prompt opened the reasoning", () => {
    expect(reasoningTokenCount(r1, [9, 9, 2, 9], markers)).toBe(2);
    expect(reasoningTokenCount(r1, [1, 9, 2, 9], markers)).toBe(1);
    expect(reasoningTokenCount(r1, [9, 9, 9], markers)).toBe(3);
  });

  it("finds markers that are several tokens", () => {
    expect(reasoningTokenCount(qwen3, [3, 4, 9, 9, 5, 6, 9], { open: [3, 4], close: [5, 6] })).toBe(2);
  });
});
