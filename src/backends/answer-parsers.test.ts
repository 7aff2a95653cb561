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
    expect(() => createBackend(cfg({ type: "vllm", toolParser: "qwen-ish" }))).toThrow("backend 'b' toolParser: unknown tool parser 'qwen-ish' (known: arbor, hermes, llama3_json, mistral)");
    expect(() => createBackend(cfg({ type: "vllm", reasoningParser: "deep" }))).toThrow("backend 'b' reasoningParser: unknown reasoning parser 'deep' (known: none, think)");
  });

  it("resolves every registered parser by name", () => {
    for (const name of ["arbor", "hermes", "llama3_json", "mistral"]) expect(toolParserNamed(name, "t").name).toBe(name);
    for (const name of ["think", "none"]) expect(reasoningParserNamed(name, "t").name).toBe(name);
  });
});
