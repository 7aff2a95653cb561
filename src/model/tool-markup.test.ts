import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { reasoningParserRegistry } from "./reasoning/registry.js";
import { ChatAnswerStream, chatAnswer, planTools, ToolChoiceError, toolCallAnswer, toolCallDeltas, toolCallsAsMarkup } from "./tool-markup.js";
import { toolParserRegistry } from "./tool-parsers/registry.js";

const tools = [{ function: { name: "get_weather", description: "now", parameters: { type: "object" } } }, { function: { name: "noop", description: null } }];

describe("planTools", () => {
  it("declares the tools and forces a call's opening for required / a named tool", () => {
    expect(planTools({ tools })).toEqual({ specs: [{ name: "get_weather", description: "now", parameters: { type: "object" } }, { name: "noop" }], parse: true, single: false, parser: expect.objectContaining({ name: "arbor" }) });
    expect(planTools({ tools, tool_choice: "required" })?.prefill).toBe("<|tool_call|>");
    expect(planTools({ tools, tool_choice: { type: "function", function: { name: "noop" } }, parallel_tool_calls: false })).toMatchObject({ prefill: "<|tool_call|>noop ", single: true });
    expect(planTools({ tools, tool_choice: "none" })).toMatchObject({ parse: false });
    expect(planTools({})).toBeUndefined();
    expect(planTools({ tools: [], tool_choice: "none" })).toBeUndefined();
  });

  it("names the field of a tool_choice the tools cannot satisfy", () => {
    const err = (body: Parameters<typeof planTools>[0]) => {
      try {
        planTools(body);
      } catch (e) {
        return e instanceof ToolChoiceError ? [e.field, e.reason] : e;
      }
      return undefined;
    };
    expect(err({ tool_choice: "required" })).toEqual(["tool_choice", "requires tools"]);
    expect(err({ tools, tool_choice: { type: "function", function: { name: "rm" } } })).toEqual(["tool_choice.function.name", "no tool named 'rm' in tools"]);
  });
});

describe("toolCallAnswer / toolCallsAsMarkup", () => {
  it("reads a forced answer with its prefill, and writes calls back as the policy's markup", () => {
    const plan = planTools({ tools, tool_choice: { type: "function", function: { name: "get_weather" } } });
    const a = toolCallAnswer('{"city":"Oslo"}<|/tool_call|>', "stop", plan!, "call_x");
    expect(a).toEqual({ message: { role: "assistant", content: null, tool_calls: [{ id: "call_x_0", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] }, finishReason: "tool_calls" });
    expect(toolCallsAsMarkup("", a.message.tool_calls!)).toBe('<|tool_call|>get_weather {"city":"Oslo"}<|/tool_call|>');
  });
});

describe("plans and answers in every registered format", () => {
  const declared = [{ function: { name: "get_weather" } }, { function: { name: "noop" } }];

  it("forces a call with the plan's parser's prefill", () => {
    for (const name of toolParserRegistry.names()) {
      const parser = toolParserRegistry.create(name);
      expect(planTools({ tools: declared, tool_choice: "required" }, parser)?.prefill).toBe(parser.prefill());
      expect(planTools({ tools: declared, tool_choice: { type: "function", function: { name: "noop" } } }, parser)).toMatchObject({ prefill: parser.prefill("noop"), parser });
    }
  });

  it("a streamed answer split anywhere adds up to chatAnswer, for every parser with and without <think> reasoning", () => {
    const calls = [
      { name: "get_weather", arguments: '{"city": "Oslo"}' },
      { name: "noop", arguments: "{}" },
    ];
    const cases = toolParserRegistry.names().flatMap((name) =>
      reasoningParserRegistry.names().map((r) => {
        const parser = toolParserRegistry.create(name);
        const reasoning = reasoningParserRegistry.create(r);
        const body = parser.format(parser.contentWithCalls ? "Sure." : "", calls);
        return { plan: planTools({ tools: declared }, parser, reasoning)!, text: r === "think" ? reasoning.format("\nplan\n", body) : body };
      }),
    );
    fc.assert(
      fc.property(fc.constantFrom(...cases), fc.array(fc.nat(), { maxLength: 6 }), ({ plan, text }, raw) => {
        const whole = chatAnswer(text, "stop", plan, "c");
        expect(whole.message.tool_calls?.map((c) => c.function)).toEqual(calls);
        const cuts = [...new Set(raw.map((n) => n % (text.length + 1)))].sort((a, b) => a - b);
        const stream = new ChatAnswerStream(plan, "c");
        const got = { reasoning: "", content: "", calls: [] as unknown[] };
        let from = 0;
        for (const at of [...cuts, text.length]) {
          const step = stream.push(text.slice(from, at));
          from = at;
          got.reasoning += step.reasoning;
          got.content += step.content;
          got.calls.push(...step.calls);
        }
        const rest = stream.flush();
        got.reasoning += rest.reasoning;
        got.content += rest.content;
        got.calls.push(...rest.calls);
        expect(got.reasoning).toBe(whole.message.reasoning_content ?? "");
        expect(got.content).toBe(whole.message.content ?? "");
        expect(got.calls).toEqual(whole.message.tool_calls);
      }),
      { numRuns: 300 },
    );
  });

  it("streams completed calls as vLLM does: id, type and name with arguments \"\", then the arguments", () => {
    const call = { id: "c_3", type: "function" as const, function: { name: "noop", arguments: "{}" } };
    expect(toolCallDeltas([call], 3)).toEqual([
      { index: 3, id: "c_3", type: "function", function: { name: "noop", arguments: "" } },
      { index: 3, function: { arguments: "{}" } },
    ]);
  });
});
