import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EngineConfigSchema } from "../core/config.js";
import { ArborError } from "../core/errors.js";
import { realClock } from "../core/real-clock.js";
import { stopTokenIds } from "../model/chat-template.js";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { describeExecutorContract, type ExecutorHarness } from "./executor.contract.js";
import { builtinExecutors, executorRegistry, type ExecutorSpec } from "./executor-registry.js";
import { ScriptedExecutor } from "../testing/scripted-executor.js";

const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const dir = mkdtempSync(join(tmpdir(), "arbor-executor-registry-"));
const modelPath = ensurePolicy(dir, { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 }).path;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spec = (o: Partial<ExecutorSpec> = {}): ExecutorSpec => ({
  engine: "contract",
  modelPath,
  sequences: 2,
  contextSize: 128,
  maxWaiting: 4,
  stopTokenIds: STOPS,
  clock: realClock,
  vocab,
  seed: 3,
  ...o,
});

/** The executor contract's options per built-in kind; a kind registered without one fails below. */
const harnessOf: Record<string, Omit<ExecutorHarness, "open" | "stopTokenIds" | "prompt"> & { spec?: Partial<ExecutorSpec> }> = {
  llamacpp: { deterministic: true },
  "llamacpp-scheduled": { deterministic: true },
  // A fast profile would do as well: the contract only reads the tokens, not the timing.
  costmodel: { deterministic: false, spec: { costProfile: "llama-3-8b/h100" } },
};

describe("executor registry", () => {
  it("has a contract harness for every built-in kind (a new kind must pass the executor contract)", () => {
    expect(executorRegistry.kinds().sort()).toEqual(Object.keys(harnessOf).sort());
  });

  it("accepts every built-in kind in a run config's engines[].executor", () => {
    for (const kind of executorRegistry.kinds()) {
      const parsed = EngineConfigSchema.safeParse({ name: "e", executor: kind, costProfile: "llama-3-8b/h100" });
      expect(parsed.success, kind).toBe(true);
    }
  });

  it("refuses an unknown kind, naming the registered ones", async () => {
    await expect(executorRegistry.create("vllm", spec())).rejects.toThrow(/executorKind must be "llamacpp", "llamacpp-scheduled", "costmodel", got "vllm"/);
  });

  it("refuses a second factory under one kind and a malformed kind", () => {
    const r = builtinExecutors();
    expect(() => r.register("costmodel", () => Promise.reject(new Error("x")))).toThrow(/already registered/);
    expect(() => r.register("Bad Kind", () => Promise.reject(new Error("x")))).toThrow(/lowercase/);
  });

  it("serves a kind registered by a caller, without touching the shared registry", async () => {
    const r = executorRegistry.clone().register("scripted", async (s) => new ScriptedExecutor(() => "hi", s.contextSize));
    const ex = await r.create("scripted", spec());
    expect(ex.contextSize).toBe(128);
    expect(executorRegistry.has("scripted")).toBe(false);
    await ex.close();
  });

  it("refuses sampler llama.cpp on the kinds other than llamacpp", async () => {
    for (const kind of ["llamacpp-scheduled", "costmodel"]) {
      await expect(executorRegistry.create(kind, spec({ sampler: "llama.cpp", costProfile: "llama-3-8b/h100" }))).rejects.toThrow(new RegExp(`sampler "llama.cpp" runs on executorKind "llamacpp", not "${kind}"`));
    }
  });

  it("refuses speculative decoding on the kinds that do not speculate", async () => {
    for (const kind of ["llamacpp", "costmodel"]) {
      await expect(executorRegistry.create(kind, spec({ speculative: { method: "suffix" }, costProfile: "llama-3-8b/h100" }))).rejects.toThrow(/speculative decoding runs on executorKind "llamacpp-scheduled"/);
    }
  });

  it("refuses costmodel without a profile as a config error", async () => {
    const err = await executorRegistry.create("costmodel", spec()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArborError);
    expect((err as ArborError).message).toMatch(/executorKind "costmodel" needs costProfile/);
  });
});

const prompt = [vocab.bosId, ...vocab.encode("2+3=")];
for (const [kind, h] of Object.entries(harnessOf)) {
  describeExecutorContract(kind, {
    open: () => executorRegistry.create(kind, spec(h.spec)),
    stopTokenIds: STOPS,
    prompt,
    deterministic: h.deterministic,
  });
}

// Speculative decoding changes how tokens are computed, never what the contract promises.
describeExecutorContract("llamacpp-scheduled with speculative decoding", {
  open: () => executorRegistry.create("llamacpp-scheduled", spec({ speculative: { method: "suffix", maxSpecTokens: 4 } })),
  stopTokenIds: STOPS,
  prompt,
  deterministic: true,
});

describeExecutorContract("scripted (test double)", {
  open: async () => new ScriptedExecutor((p) => (p.length % 2 === 0 ? "even answer" : "odd")),
  stopTokenIds: STOPS,
  prompt,
  deterministic: true,
});
