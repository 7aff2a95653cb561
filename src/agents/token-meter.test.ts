import { describe, expect, it } from "vitest";
import type { AgentMessage } from "./agent-message.js";
import { TokenMeter } from "./token-meter.js";

describe("TokenMeter", () => {
  it("estimates before any call, then is exact for what the engine measured and calibrated for the rest", () => {
    const meter = new TokenMeter(4);
    const sys: AgentMessage = { role: "system", content: "x".repeat(40) };
    const user: AgentMessage = { role: "user", content: "y".repeat(40) };
    expect(meter.count([sys, user])).toBe(2 * (2 + 10));
    const answer: AgentMessage = { role: "assistant", content: "z".repeat(20) };
    // The engine says the two messages were 84 tokens (1 token per character + 2 per message), the answer 20.
    meter.observe([sys, user], answer, 84, 20);
    expect(meter.count([sys, user])).toBe(84);
    expect(meter.count([sys, user, answer])).toBe(104);
    const tool: AgentMessage = { role: "tool", content: "t".repeat(10) };
    expect(meter.count([sys, user, answer, tool])).toBe(104 + 2 + 10);
    // A context that replaced the tail keeps the exactly-known task prefix.
    const note: AgentMessage = { role: "user", content: "n".repeat(5) };
    expect(meter.count([sys, user, note])).toBe(84 + 2 + 5);
    // Equal text in other objects is not assumed measured: estimated.
    expect(meter.count([{ ...sys }, { ...user }])).toBe(2 * (2 + 40));
  });
});
