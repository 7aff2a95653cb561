import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { realClock } from "../core/real-clock.js";
import { draftServiceHost, engineServerOptions, withDraftService } from "./engine-start.js";

const opts = { modelPath: "m.gguf", host: "127.0.0.1", seed: 1, clock: realClock };

describe("engineServerOptions", () => {
  it("passes an engine's speculative setting to its server, and none when the engine has none", () => {
    const cfg = parseRunConfig({ engines: [{ name: "a", speculative: { method: "suffix", maxSpecTokens: 5 } }, { name: "b" }] });
    expect(engineServerOptions(cfg.engines[0]!, opts).speculative).toEqual({ method: "suffix", maxSpecTokens: 5 });
    expect("speculative" in engineServerOptions(cfg.engines[1]!, opts)).toBe(false);
  });
});

describe("a run's shared draft service", () => {
  const suffix = { method: "suffix" as const };
  it("two or more suffix-speculating engines share the first one's group trees; others are left as configured", () => {
    const cfg = parseRunConfig({
      engines: [
        { name: "plain" },
        { name: "a", speculative: suffix },
        { name: "own", speculative: { ...suffix, draftService: { url: "http://svc:9" } } },
        { name: "b", speculative: suffix },
        { name: "dm", speculative: { method: "draft-model", draftModel: "d.gguf" } },
      ],
    });
    expect(draftServiceHost(cfg.engines)).toBe(1);
    const url = "http://127.0.0.1:4000";
    expect(withDraftService(cfg.engines[3]!, url).speculative?.draftService).toEqual({ url });
    expect(withDraftService(cfg.engines[2]!, url).speculative?.draftService).toEqual({ url: "http://svc:9" });
    expect(withDraftService(cfg.engines[0]!, url)).toBe(cfg.engines[0]);
    expect(withDraftService(cfg.engines[4]!, url)).toBe(cfg.engines[4]);
  });

  it("one such engine shares nothing", () => {
    expect(draftServiceHost(parseRunConfig({ engines: [{ name: "a", speculative: suffix }, { name: "b" }] }).engines)).toBeUndefined();
  });

  it("the config refuses a draftService with the draft-model method, and a URL that is not one", () => {
    expect(() => parseRunConfig({ engines: [{ name: "a", executor: "llamacpp-scheduled", speculative: { method: "draft-model", draftService: { url: "http://x:1" } } }] })).toThrow(/draftService/);
    expect(() => parseRunConfig({ engines: [{ name: "a", executor: "llamacpp-scheduled", speculative: { method: "suffix", draftService: { url: "x:1" } } }] })).toThrow(/http\(s\) base URL/);
  });
});
