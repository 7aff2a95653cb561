import { describe, expect, it } from "vitest";
import { BackendConfigSchema } from "../core/config.js";
import { reasoningParserNamed, toolParserNamed } from "./answer-parsers.js";
import { createBackend } from "./registry.js";

const cfg = (o: Record<string, unknown>) => BackendConfigSchema.parse({ name: "b", url: "http://127.0.0.1:1/v1", ...o });

describe("backend parsers", () => {
  it("a builtin backend reads Arbor's markup by default; other engines have no parser unless configured", () => {
    expect(createBackend(cfg({ type: "builtin" })).toolParser?.name).toBe("arbor");
    expect(createBackend(cfg({ type: "vllm" })).toolParser).toBeUndefined();
    expect(createBackend(cfg({ type: "llamacpp" })).toolParser).toBeUndefined();
    const vllm = createBackend(cfg({ type: "vllm", toolParser: "arbor", reasoningParser: "think" }));
    expect([vllm.toolParser?.name, vllm.reasoningParser?.name]).toEqual(["arbor", "think"]);
    // An in-process engine's parsers apply where the backend config names none.
    const local = createBackend(BackendConfigSchema.parse({ name: "e0", type: "builtin" }), { url: "http://127.0.0.1:1/v1", reasoningParser: "think" });
    expect([local.toolParser?.name, local.reasoningParser?.name]).toEqual(["arbor", "think"]);
    // The adapter still works as one (methods kept).
    expect(typeof vllm.generate).toBe("function");
    expect(vllm.capabilities.tokenIds).toBe(true);
  });

  it("an unknown parser name fails the config, naming the backend, the field and the known names", () => {
    expect(() => createBackend(cfg({ type: "vllm", toolParser: "qwen-ish" }))).toThrow("backend 'b' toolParser: unknown tool parser 'qwen-ish' (known: arbor)");
    expect(() => createBackend(cfg({ type: "vllm", reasoningParser: "deep" }))).toThrow("backend 'b' reasoningParser: unknown reasoning parser 'deep' (known: think)");
  });

  it("arbor: prefill and format are the markup the engine writes", () => {
    const p = toolParserNamed("arbor", "t");
    expect(p.prefill()).toBe("<|tool_call|>");
    expect(p.prefill("calc")).toBe("<|tool_call|>calc ");
    const text = p.format("Sure.", [{ name: "calc", arguments: '{"x":1}' }]);
    const s = p.stream({ names: new Set(["calc"]), idPrefix: "c" });
    const got = [s.push(text), s.flush()];
    expect(got.map((g) => g.content).join("")).toBe("Sure.");
    expect(got.flatMap((g) => g.calls)).toEqual([{ id: "c_0", type: "function", function: { name: "calc", arguments: '{"x":1}' } }]);
  });

  it("think: <think>…</think> at the start is reasoning, split the same at every cut; elsewhere it is content", () => {
    const think = reasoningParserNamed("think", "t");
    const whole = (text: string, cuts: number[]): [string, string] => {
      const r = think.stream();
      const parts = [...cuts.map((c, i) => text.slice(i === 0 ? 0 : (cuts[i - 1] as number), c)), text.slice(cuts.at(-1) ?? 0)];
      const out = [...parts.map((p) => r.push(p)), r.flush()];
      return [out.map((o) => o.reasoning).join(""), out.map((o) => o.content).join("")];
    };
    const text = "<think>\nadd 2 and 2\n</think>\n\nIt is 4.";
    for (let c = 0; c <= text.length; c++) expect(whole(text, [c])).toEqual(["\nadd 2 and 2\n", "\n\nIt is 4."]);
    expect(whole("It is <think>4</think>", [3])).toEqual(["", "It is <think>4</think>"]);
    expect(whole("<think>never closed", [4])).toEqual(["never closed", ""]);
    expect(whole("<thin", [2])).toEqual(["", "<thin"]);
  });
});
