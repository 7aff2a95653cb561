import { mkdtempSync, rmSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configFromGguf, readGguf } from "../model/gguf.js";
import { ensurePolicy } from "../model/policy.js";
import { parseRunConfig } from "../core/config.js";
import { realClock } from "../core/real-clock.js";
import { draftServiceHost, engineServerOptions, withDraftService, withV0Draft } from "./engine-start.js";

const opts = { modelPath: "m.gguf", host: "127.0.0.1", seed: 1, clock: realClock };

describe("engineServerOptions", () => {
  it("passes an engine's speculative setting to its server, and none when the engine has none", () => {
    const cfg = parseRunConfig({ engines: [{ name: "a", speculative: { method: "suffix", maxSpecTokens: 5 } }, { name: "b" }] });
    expect(engineServerOptions(cfg.engines[0]!, opts).speculative).toEqual({ method: "suffix", maxSpecTokens: 5 });
    expect("speculative" in engineServerOptions(cfg.engines[1]!, opts)).toBe(false);
  });

  it("passes sampler llama.cpp to its server, and nothing for Arbor's default sampler", () => {
    const cfg = parseRunConfig({ engines: [{ name: "a", executor: "llamacpp", sampler: "llama.cpp" }, { name: "b", executor: "llamacpp" }] });
    expect(engineServerOptions(cfg.engines[0]!, opts).sampler).toBe("llama.cpp");
    expect("sampler" in engineServerOptions(cfg.engines[1]!, opts)).toBe(false);
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

describe("a draft model from policy version 0", () => {
  it("an engine with method draft-model and no draftModel gets the policy cut to `layers` blocks, made once", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-v0-draft-"));
    try {
      const policy = ensurePolicy(dir, { seed: 1, nEmbd: 32, nLayer: 3, nHead: 2, nHeadKv: 2, nFf: 64, contextLength: 256 }).path;
      const cfg = parseRunConfig({
        engines: [
          { name: "dm", speculative: { method: "draft-model" } },
          { name: "own", speculative: { method: "draft-model", draftModel: "/m/d.gguf" } },
          { name: "suffix", speculative: { method: "suffix" } },
        ],
      });
      const lines: string[] = [];
      const drafts = join(dir, "drafts");
      const e = withV0Draft(cfg.engines[0]!, policy, 2, (l) => lines.push(l), drafts);
      const path = e.speculative!.draftModel!;
      expect(path.startsWith(drafts)).toBe(true);
      const cut = readGguf(path);
      expect(configFromGguf(cut.metadata, path)).toEqual({ ...configFromGguf(readGguf(policy).metadata, policy), nLayer: 2 });
      expect(cut.tensors.some((t) => t.name.startsWith("blk.2."))).toBe(false);
      expect(lines).toHaveLength(1);
      // Made once: a second engine start reuses it; a newer policy file makes it again.
      withV0Draft(cfg.engines[0]!, policy, 2, (l) => lines.push(l), drafts);
      expect(lines).toHaveLength(1);
      const t = statSync(path).mtimeMs / 1000 + 10;
      utimesSync(policy, t, t);
      withV0Draft(cfg.engines[0]!, policy, 2, (l) => lines.push(l), drafts);
      expect(lines).toHaveLength(2);
      // A draft of its own, or another method: unchanged.
      expect(withV0Draft(cfg.engines[1]!, policy, 1, () => {}, drafts)).toBe(cfg.engines[1]);
      expect(withV0Draft(cfg.engines[2]!, policy, 1, () => {}, drafts)).toBe(cfg.engines[2]);
      // More layers than the policy has: the whole policy.
      const all = withV0Draft(cfg.engines[0]!, policy, 5, () => {}, drafts).speculative!.draftModel!;
      expect(configFromGguf(readGguf(all).metadata, all).nLayer).toBe(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
