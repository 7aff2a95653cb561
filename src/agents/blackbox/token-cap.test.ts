import { describe, expect, it } from "vitest";
import { capRequestTokens, inferenceRoute } from "./token-cap.js";

describe("per-call token cap of black-box requests", () => {
  it("finds the inference route of a proxied path", () => {
    expect(inferenceRoute("/p/a/v1/chat/completions")).toBe("chat/completions");
    expect(inferenceRoute("/p/a/v1/completions?x=1")).toBe("completions");
    expect(inferenceRoute("/p/a/v1/responses")).toBe("responses");
    expect(inferenceRoute("/p/a/v1/messages")).toBe("messages");
    expect(inferenceRoute("/p/a/v1/models")).toBeUndefined();
    expect(inferenceRoute("/p/a/v1/messages/count_tokens")).toBeUndefined();
  });

  it("lowers every limit field above the cap, keeps lower ones and the rest of the body", () => {
    expect(capRequestTokens("chat/completions", { model: "m", max_tokens: 900, max_completion_tokens: 10 }, 64, "clamp")).toEqual({
      ok: true,
      body: { model: "m", max_tokens: 64, max_completion_tokens: 10 },
      clamped: ["max_tokens"],
      asked: 900,
    });
    expect(capRequestTokens("chat/completions", { max_completion_tokens: 65 }, 64, "clamp")).toEqual({ ok: true, body: { max_completion_tokens: 64 }, clamped: ["max_completion_tokens"], asked: 65 });
    expect(capRequestTokens("responses", { max_output_tokens: 1e6 }, 64, "clamp")).toEqual({ ok: true, body: { max_output_tokens: 64 }, clamped: ["max_output_tokens"], asked: 1e6 });
    expect(capRequestTokens("messages", { max_tokens: 64 }, 64, "clamp")).toEqual({ ok: true, body: { max_tokens: 64 }, clamped: [] });
  });

  it("adds the cap when the request names no limit (null counts as none)", () => {
    expect(capRequestTokens("chat/completions", { messages: [] }, 32, "clamp")).toEqual({ ok: true, body: { messages: [], max_tokens: 32 }, clamped: [], added: "max_tokens" });
    expect(capRequestTokens("completions", { max_tokens: null }, 32, "refuse")).toEqual({ ok: true, body: { max_tokens: 32 }, clamped: [], added: "max_tokens" });
    expect(capRequestTokens("responses", {}, 32, "clamp")).toMatchObject({ body: { max_output_tokens: 32 }, added: "max_output_tokens" });
  });

  it("refuses an over-cap request naming the field, under the refuse policy", () => {
    expect(capRequestTokens("messages", { max_tokens: 4096 }, 256, "refuse")).toEqual({
      ok: false,
      field: "max_tokens",
      message: "max_tokens: 4096 is above this program's per-call limit of 256 tokens (agent.maxTokensPerCall)",
    });
    // Not a number: left for the gateway, which refuses it naming the field.
    expect(capRequestTokens("completions", { max_tokens: "9999" }, 8, "refuse")).toEqual({ ok: true, body: { max_tokens: "9999" }, clamped: [] });
  });
});
