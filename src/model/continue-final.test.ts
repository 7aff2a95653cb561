import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../core/types.js";
import { continueFinalRefusal } from "./continue-final.js";

describe("continueFinalRefusal", () => {
  const user: ChatMessage = { role: "user", content: "What is 2+2?" };
  const prefill: ChatMessage = { role: "assistant", content: "The answer is" };

  it("lets an assistant prefill be continued, with add_generation_prompt false or absent and tool_choice auto or none", () => {
    for (const generation of [undefined, false]) for (const choice of [undefined, "auto", "none"]) expect(continueFinalRefusal(generation, choice, [user, prefill])).toBeUndefined();
  });

  it("refuses it as vLLM does: beside add_generation_prompt true, after a non-assistant or tool-calling message, with a forced tool call", () => {
    expect(continueFinalRefusal(true, undefined, [user, prefill])).toBe("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    expect(continueFinalRefusal(false, undefined, [user])).toBe("the final message must be the assistant's to continue, got role 'user'");
    const calling: ChatMessage = { ...prefill, toolCalls: [{ id: "c1", name: "calc", arguments: "{}" }] };
    expect(continueFinalRefusal(false, undefined, [user, calling])).toBe("cannot continue an assistant message that makes tool calls");
    expect(continueFinalRefusal(false, "required", [user, prefill])).toMatch(/forced tool_choice/);
    expect(continueFinalRefusal(false, { type: "function", function: { name: "calc" } }, [user, prefill])).toMatch(/forced tool_choice/);
  });
});
