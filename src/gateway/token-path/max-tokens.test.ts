import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../http-errors.js";
import { fitMaxTokens } from "./max-tokens.js";

const prompt = (n: number, maxModelLen: number | null) => ({ promptTokenIds: Array.from({ length: n }, (_, i) => i), maxModelLen });

describe("fitMaxTokens", () => {
  it("keeps a budget that fits, clamps a larger one to what the context leaves", () => {
    expect(fitMaxTokens(10, "max_tokens", prompt(90, 100), "e0", "clamp")).toEqual({ maxTokens: 10 });
    expect(fitMaxTokens(11, "max_tokens", prompt(90, 100), "e0", "clamp")).toEqual({ maxTokens: 10, clamped: { asked: 11, granted: 10 } });
    expect(fitMaxTokens(64_000, "max_tokens", prompt(24, 1024), "e0", "clamp")).toEqual({ maxTokens: 1000, clamped: { asked: 64_000, granted: 1000 } });
  });

  it("refuses a larger one under 'refuse', naming the field, and a budget that fits is still served", () => {
    expect(() => fitMaxTokens(11, "max_completion_tokens", prompt(90, 100), "e0", "refuse")).toThrow(InvalidRequestError);
    expect(() => fitMaxTokens(11, "max_completion_tokens", prompt(90, 100), "e0", "refuse")).toThrow(/^max_completion_tokens: is 11, more than the 10 tokens the context leaves/);
    expect(fitMaxTokens(10, "max_tokens", prompt(90, 100), "e0", "refuse")).toEqual({ maxTokens: 10 });
  });

  it("fills an absent budget up to the context; without a known context it needs one and leaves one as asked", () => {
    expect(fitMaxTokens(undefined, "max_tokens", prompt(90, 100), "e0", "refuse")).toEqual({ maxTokens: 10 });
    expect(() => fitMaxTokens(undefined, "max_tokens", prompt(90, null), "e0", "clamp")).toThrow(/^max_tokens: required: backend 'e0' does not report its context length/);
    expect(fitMaxTokens(64_000, "max_tokens", prompt(90, null), "e0", "refuse")).toEqual({ maxTokens: 64_000 });
  });

  it("leaves the budget of a prompt that already fills the context as asked (the engine refuses the prompt)", () => {
    expect(fitMaxTokens(50, "max_tokens", prompt(100, 100), "e0", "clamp")).toEqual({ maxTokens: 50 });
    expect(fitMaxTokens(50, "max_tokens", prompt(120, 100), "e0", "refuse")).toEqual({ maxTokens: 50 });
  });
});
