// Speculative decoding with a draft model (method "draft-model"): a small GGUF's greedy proposals, verified
// exactly, so outputs and logprobs equal the non-speculative engine's; the draft beside a versioned policy
// checkpoint (draft-vN.gguf) is the one served; the policy as its own draft is accepted in full when greedy.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { stopTokenIds } from "../../model/chat-template.js";
import { cutDraftModel } from "../../model/draft-cut.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import { expectSameResults } from "../../testing/same-results.js";
import type { GenerateResult } from "../executor.js";
import { PositionKeyedRng } from "../position-keyed-rng.js";
import { loadScheduledLlamaCpp } from "./scheduled-engines.js";
import type { ScheduledExecutor } from "./scheduled-executor.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const CTX = 256;
const prompt = (text: string): number[] => [vocab.bosId, ...vocab.encode(text)];

let dir: string;
let policyPath: string;
let shallowPath: string;
let plain: ScheduledExecutor;
const opened: ScheduledExecutor[] = [];

const CASES = [
  { prompt: prompt("The quick brown fox jumps over the lazy dog, twice."), maxTokens: 30, temperature: 0, rng: () => new Rng(1) },
  { prompt: prompt("one two three one two three"), maxTokens: 30, temperature: 1, rng: () => PositionKeyedRng.fromSeed(7) },
  { prompt: prompt("Name a colour."), maxTokens: 30, temperature: 0.7, rng: () => new Rng(3) },
];

function gen(e: ScheduledExecutor, c: (typeof CASES)[number]): Promise<GenerateResult> {
  return e.generate({ promptTokenIds: c.prompt, maxTokens: c.maxTokens, temperature: c.temperature, topP: 1, topLogprobs: 2, rng: c.rng() });
}

async function withDraft(modelPath: string, draftModel?: string): Promise<ScheduledExecutor> {
  const e = await loadScheduledLlamaCpp({
    modelPath,
    sequences: 3,
    contextSize: CTX,
    maxWaiting: 8,
    stopTokenIds: STOPS,
    speculative: { method: "draft-model", maxSpecTokens: 4, adaptive: false, ...(draftModel !== undefined ? { draftModel } : {}) },
  });
  opened.push(e);
  return e;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-specdec-draft-"));
  policyPath = ensurePolicy(dir, INIT).path;
  // The draft an engine gets at policy version 0: the policy cut to its first block.
  shallowPath = join(dir, "shallow.gguf");
  expect(cutDraftModel(policyPath, shallowPath, 1)).toEqual({ layers: 1 });
  plain = await loadScheduledLlamaCpp({ modelPath: policyPath, sequences: 3, contextSize: CTX, maxWaiting: 8, stopTokenIds: STOPS });
});

afterAll(async () => {
  for (const e of opened) await e.close();
  await plain?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("speculative decoding with a draft model", () => {
  it("a one-block draft: the same tokens and logprobs as without speculation, greedy and sampled, alone and batched", async () => {
    const want = [];
    for (const c of CASES) want.push(await gen(plain, c));
    const e = await withDraft(policyPath, shallowPath);
    const got = [];
    for (const c of CASES) got.push(await gen(e, c));
    expectSameResults(got, want);
    expectSameResults(await Promise.all(CASES.map((c) => gen(e, c))), want);
    const s = e.stats().specDecode!;
    expect(s.numDrafts).toBeGreaterThan(0);
    expect(s.numAcceptedTokens).toBeLessThanOrEqual(s.numDraftTokens);
  });

  it("the policy as its own draft is accepted in full under greedy decoding", async () => {
    const c = CASES[0]!;
    const want = await gen(plain, c);
    const e = await withDraft(policyPath, policyPath);
    expectSameResults([await gen(e, c)], [want]);
    const s = e.stats().specDecode!;
    // Every draft token but those cut by the end of the request agrees with the target's argmax.
    expect(s.numAcceptedTokens).toBeGreaterThanOrEqual(s.numDraftTokens - 4);
    expect(s.numAcceptedTokens).toBeGreaterThan(want.tokens.length / 2);
  });

  it("serves the draft-vN.gguf beside policy-vN.gguf over the configured one, and needs one of them", async () => {
    const ckpt = join(dir, "ckpt");
    rmSync(ckpt, { recursive: true, force: true });
    const { mkdirSync } = await import("node:fs");
    mkdirSync(ckpt);
    const v3 = join(ckpt, "policy-v3.gguf");
    copyFileSync(policyPath, v3);
    await expect(withDraft(v3)).rejects.toThrow(/speculative\.draftModel: method "draft-model" needs a draft GGUF.*draft-v3\.gguf/);
    // The policy beside it as its draft: full acceptance shows which file is served (the configured one is shallow).
    copyFileSync(policyPath, join(ckpt, "draft-v3.gguf"));
    const e = await withDraft(v3, shallowPath);
    const c = CASES[0]!;
    expectSameResults([await gen(e, c)], [await gen(plain, c)]);
    const s = e.stats().specDecode!;
    expect(s.numAcceptedTokens).toBeGreaterThanOrEqual(s.numDraftTokens - 4);
  });
});
