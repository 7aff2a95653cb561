import { describe, expect, it } from "vitest";
import { parseRunConfig } from "../core/config.js";
import { realClock } from "../core/real-clock.js";
import { engineServerOptions } from "./engine-start.js";

const opts = { modelPath: "m.gguf", host: "127.0.0.1", seed: 1, clock: realClock };

describe("engineServerOptions", () => {
  it("passes an engine's speculative setting to its server, and none when the engine has none", () => {
    const cfg = parseRunConfig({ engines: [{ name: "a", speculative: { method: "suffix", maxSpecTokens: 5 } }, { name: "b" }] });
    expect(engineServerOptions(cfg.engines[0]!, opts).speculative).toEqual({ method: "suffix", maxSpecTokens: 5 });
    expect("speculative" in engineServerOptions(cfg.engines[1]!, opts)).toBe(false);
  });
});
