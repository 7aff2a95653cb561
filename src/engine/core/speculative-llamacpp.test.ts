// Speculative decoding on the scheduled llama.cpp engine: verification is exact, so outputs,
// finish reasons and logprobs equal the non-speculative engine's, for greedy and sampling alike,
// while drafts from the suffix trees are accepted on repetitive text.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Rng } from "../../core/rng.js";
import { Rng as PlainRng } from "../../core/rng.js";
import { stopTokenIds } from "../../model/chat-template.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import type { GenerateResult } from "../executor.js";
import { PositionKeyedRng } from "../position-keyed-rng.js";
import type { SamplingControls } from "../sampling.js";
import type { StepPlan } from "../scheduler/step-plan.js";
import type { LlamaCppStepRunner } from "./llamacpp-step-runner.js";
import { loadScheduledLlamaCpp } from "./scheduled-engines.js";
import type { ScheduledExecutor } from "./scheduled-executor.js";
import { meanAcceptanceLength, type RunnerStepResult } from "./step-runner.js";
import { expectSameResults } from "../../testing/same-results.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const STOPS = stopTokenIds(vocab);
const CTX = 256;

let dir: string;
let modelPath: string;
let plain: ScheduledExecutor;
const opened: ScheduledExecutor[] = [];

interface Case {
  prompt: number[];
  maxTokens: number;
  temperature: number;
  rng: () => Rng;
  controls?: SamplingControls;
}

const prompt = (text: string): number[] => [vocab.bosId, ...vocab.encode(text)];

function gen(e: ScheduledExecutor, c: Case, onToken?: (id: number) => void): Promise<GenerateResult> {
  return e.generate({
    promptTokenIds: c.prompt,
    maxTokens: c.maxTokens,
    temperature: c.temperature,
    topP: 1,
    topLogprobs: 2,
    rng: c.rng(),
    ...(c.controls ? { controls: c.controls } : {}),
    ...(onToken ? { onToken: (t) => onToken(t.id) } : {}),
  });
}

async function speculative(o: Partial<Parameters<typeof loadScheduledLlamaCpp>[0]> = {}, steps?: { plan: StepPlan; result: RunnerStepResult }[]): Promise<ScheduledExecutor> {
  const e = await loadScheduledLlamaCpp({
    modelPath,
    sequences: 3,
    contextSize: CTX,
    maxWaiting: 8,
    stopTokenIds: STOPS,
    // Every draft verified in full (no adaptive budget): these tests check verification itself.
    speculative: { method: "suffix", maxSpecTokens: 6, adaptive: false },
    ...(steps ? { onStep: (plan: StepPlan, result: RunnerStepResult) => steps.push({ plan, result }) } : {}),
    ...o,
  });
  opened.push(e);
  return e;
}

const specStats = (e: ScheduledExecutor) => e.stats().specDecode!;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-specdec-"));
  modelPath = ensurePolicy(dir, INIT).path;
  plain = await loadScheduledLlamaCpp({ modelPath, sequences: 3, contextSize: CTX, maxWaiting: 8, stopTokenIds: STOPS });
});

afterAll(async () => {
  for (const e of opened) await e.close();
  await plain?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const GREEDY: Case[] = [
  { prompt: prompt("The quick brown fox jumps over the lazy dog, twice."), maxTokens: 40, temperature: 0, rng: () => new PlainRng(1) },
  { prompt: prompt("one two three one two three one two three one two"), maxTokens: 40, temperature: 0, rng: () => new PlainRng(2) },
  { prompt: prompt("Name a colour."), maxTokens: 30, temperature: 0, rng: () => new PlainRng(3) },
];

const SAMPLED: Case[] = [
  { prompt: prompt("What is 2+3? Answer briefly."), maxTokens: 40, temperature: 1, rng: () => PositionKeyedRng.fromSeed(7) },
  { prompt: prompt("abc abc abc abc abc abc abc"), maxTokens: 40, temperature: 1, rng: () => new PlainRng(8) },
  { prompt: prompt("Name a colour."), maxTokens: 30, temperature: 0.7, rng: () => PositionKeyedRng.fromSeed(9), controls: { repetitionPenalty: 1.2, minTokens: 5 } },
];

describe("speculative decoding on the scheduled llama.cpp engine", () => {
  it("greedy: the same tokens and logprobs as without speculation, drafts accepted on a repeated request", async () => {
    const want = [];
    for (const c of GREEDY) want.push(await gen(plain, c));
    const e = await speculative();
    // Alone, then batched; the second round drafts from the global tree of the first responses.
    const got = [];
    for (const c of GREEDY) got.push(await gen(e, c));
    expectSameResults(got, want);
    const first = specStats(e);
    expectSameResults(await Promise.all(GREEDY.map((c) => gen(e, c))), want);
    const s = specStats(e);
    expect(s.numDrafts).toBeGreaterThan(first.numDrafts);
    expect(s.numAcceptedTokens - first.numAcceptedTokens).toBeGreaterThan(0);
    // Per verification step of the repeated requests, more than two tokens on average.
    const second = { numDrafts: s.numDrafts - first.numDrafts, numDraftTokens: s.numDraftTokens - first.numDraftTokens, numAcceptedTokens: s.numAcceptedTokens - first.numAcceptedTokens };
    expect(meanAcceptanceLength(second)).toBeGreaterThan(2);
    expect(meanAcceptanceLength({ numDrafts: 0, numDraftTokens: 0, numAcceptedTokens: 0 })).toBe(0);
    // A repeated response is drafted from the global tree: most of its tokens come in verified runs.
    expect(s.numAcceptedTokens - first.numAcceptedTokens).toBeGreaterThan(want.reduce((n, r) => n + r.tokens.length, 0) / 2);
    expect(e.stats()).toMatchObject({ running: 0, waiting: 0, usedTokens: 0 });
  });

  it("sampling with seeds (keyed and plain Rng, penalties, min_tokens): the same tokens and logprobs", async () => {
    const want = [];
    for (const c of SAMPLED) want.push(await gen(plain, c));
    const e = await speculative();
    const got = [];
    for (const c of SAMPLED) got.push(await gen(e, c));
    expectSameResults(got, want);
    const before = specStats(e);
    expectSameResults(await Promise.all(SAMPLED.map((c) => gen(e, c))), want);
    const s = specStats(e);
    expect(s.numAcceptedTokens - before.numAcceptedTokens).toBeGreaterThan(0);
    expect(s.numAcceptedTokens).toBeLessThanOrEqual(s.numDraftTokens);
  });

  it("with the adaptive budget (the default), whatever it decides, the outputs are the same", async () => {
    const want = [];
    for (const c of [...GREEDY, ...SAMPLED]) want.push(await gen(plain, c));
    const e = await speculative({ speculative: { method: "suffix", maxSpecTokens: 6 } });
    for (let round = 0; round < 3; round++) expectSameResults(await Promise.all([...GREEDY, ...SAMPLED].map((c) => gen(e, c))), want);
    expect(specStats(e).numAcceptedTokens).toBeLessThanOrEqual(specStats(e).numDraftTokens);
  });

  it("streams every token of a verified run, in order", async () => {
    const c = GREEDY[1]!;
    const want = await gen(plain, c);
    const e = await speculative();
    await gen(e, c);
    const streamed: number[] = [];
    const got = await gen(e, c, (id) => streamed.push(id));
    expectSameResults([got], [want]);
    expect(streamed).toEqual(want.tokens.map((t) => t.id));
  });

  it("ends at a stop token and at max_tokens inside an accepted run, as without speculation", async () => {
    const base = GREEDY[0]!;
    const full = await gen(plain, base);
    // A stop token the plain run meets after several tokens: its first occurrence at index >= 8.
    const ids = full.tokens.map((t) => t.id);
    const at = ids.findIndex((id, i) => i >= 8 && ids.indexOf(id) === i);
    expect(at).toBeGreaterThan(0);
    const stopCase: Case = { ...base, controls: { stopTokenIds: [ids[at]!] } };
    const lengthCase: Case = { ...base, maxTokens: 13 };
    const want = [await gen(plain, stopCase), await gen(plain, lengthCase)];
    expect(want[0]!.finishReason).toBe("stop");
    expect(want[0]!.tokens).toHaveLength(at + 1);
    expect(want[1]!.finishReason).toBe("length");

    const steps: { plan: StepPlan; result: RunnerStepResult }[] = [];
    const e = await speculative({}, steps);
    await gen(e, base); // its response goes to the global tree: the next runs are drafted from it
    for (const [i, c] of [stopCase, lengthCase].entries()) {
      steps.length = 0;
      expectSameResults([await gen(e, c)], [want[i]!]);
      // The last step of the request produced several tokens: the end fell inside a verified run.
      const last = steps.filter((s) => s.result.sampled.some((t) => t !== undefined)).at(-1)!;
      expect(last.plan.chunks).toHaveLength(1);
      expect(last.result.moreTokens?.[0]?.length ?? 0).toBeGreaterThan(0);
    }
  });

  it("after rejections the sequence's KV holds exactly the accepted tokens and decoding continues correctly", async () => {
    const c = GREEDY[1]!;
    const want = await gen(plain, c);
    // A draft that is certainly wrong at first: the global tree holds a different continuation.
    let rejections = 0;
    const kvAfterRejection: { held: number[]; accepted: number[] }[] = [];
    const e = await speculative({
      sequences: 1,
      onStep: (plan, result) => {
        const ch = plan.chunks[0]!;
        const draft = ch.draftTokenIds ?? [];
        if (draft.length === 0 || (result.moreTokens?.[0]?.length ?? 0) >= draft.length) return;
        // Right after a step that rejected part of its draft: only the accepted tokens are in KV.
        // (The engine swallows an observer's exceptions: record, assert after.)
        rejections++;
        const st = e.scheduler.requestState(ch.requestId)!;
        kvAfterRejection.push({ held: (e.runner as LlamaCppStepRunner).sequenceTokens(0), accepted: [...c.prompt, ...st.outputTokenIds].slice(0, -1) });
      },
    });
    const runner = e.runner as LlamaCppStepRunner;
    const decoy: Case = { ...c, temperature: 1, rng: () => new PlainRng(99) };
    await gen(e, decoy);
    const before = specStats(e);
    rejections = 0;
    const got = await gen(e, c);
    expectSameResults([got], [want]);
    expect(rejections).toBeGreaterThan(0);
    for (const k of kvAfterRejection) expect(k.held).toEqual(k.accepted);
    const s = specStats(e);
    expect(s.numDraftTokens - before.numDraftTokens).toBeGreaterThan(s.numAcceptedTokens - before.numAcceptedTokens);
    // The sequence holds the prompt and every output but the last (never fed back): no draft left over.
    expect(runner.sequenceTokens(0)).toEqual([...c.prompt, ...got.tokens.map((t) => t.id)].slice(0, -1));
  });

  it("preempts under a tiny KV cache (draft positions take slots too) and still gives every request its tokens", async () => {
    const cases = GREEDY.map((c, i) => ({ ...c, maxTokens: 16, temperature: i === 1 ? 0 : 1, rng: () => PositionKeyedRng.fromSeed(40 + i) }));
    const want = [];
    for (const c of cases) want.push(await gen(plain, c));
    const e = await speculative({ blockSize: 4, numBlocks: 18, contextSize: 72, maxNumBatchedTokens: 72 });
    // Twice: the second round verifies drafts from the first one's responses.
    for (let round = 0; round < 2; round++) expectSameResults(await Promise.all(cases.map((c) => gen(e, c))), want);
    expect(e.stats().preemptions).toBeGreaterThan(0);
    expect(specStats(e).numAcceptedTokens).toBeGreaterThan(0);
    expect(e.stats()).toMatchObject({ running: 0, waiting: 0, usedTokens: 0 });
  });

  it("siblings of a draft group draft from each other's responses (Seer), with the same outputs", async () => {
    // Greedy siblings give the same response: the group's tree drafts the second from the first.
    const c: Case = { ...GREEDY[0]!, maxTokens: 30 };
    const want = await gen(plain, c);
    const run = async (draftGroupId?: string): Promise<number> => {
      // No global tree: only the request's own tree and, with a group, the group's. Every draft verified (no
      // adaptive budget: it fits measured step times, and on a loaded machine it once verified none).
      const e = await speculative({ speculative: { method: "suffix", maxSpecTokens: 6, maxCachedResponses: 0, adaptive: false } });
      for (let i = 0; i < 2; i++) {
        const r = await e.generate({ promptTokenIds: c.prompt, maxTokens: c.maxTokens, temperature: 0, topP: 1, topLogprobs: 2, rng: c.rng(), ...(draftGroupId ? { draftGroupId } : {}) });
        expectSameResults([r], [want]);
      }
      return specStats(e).numAcceptedTokens;
    };
    const alone = await run();
    const grouped = await run("group-1");
    expect(grouped).toBeGreaterThan(alone);
    // The group adds more accepted draft tokens than half the response.
    expect(grouped - alone).toBeGreaterThan(want.tokens.length / 2);
  });

  it("a paused program's saved KV (accepted tokens only) is loaded for its next turn, which continues exactly", async () => {
    const base = GREEDY[1]!;
    const turn = async (e: ScheduledExecutor, p: number[]) =>
      e.generate({ promptTokenIds: p, maxTokens: 20, temperature: 1, topP: 1, topLogprobs: 2, rng: PositionKeyedRng.fromSeed(5), programId: "prog" });
    const play = async (e: ScheduledExecutor): Promise<GenerateResult[]> => {
      const t1 = await turn(e, base.prompt);
      await e.programs!.pause("prog", "L2");
      await e.programs!.restore("prog");
      const t2 = await turn(e, [...base.prompt, ...t1.tokens.map((t) => t.id), ...vocab.encode(" again:")]);
      return [t1, t2];
    };
    const want = await play(plain);
    const e = await speculative({ sequences: 1 });
    await gen(e, base); // the global tree drafts the program's turns
    expectSameResults(await play(e), want);
    expect((e.runner as LlamaCppStepRunner).stats()).toMatchObject({ savedStates: 1, loadedStates: 1 });
    expect(specStats(e).numAcceptedTokens).toBeGreaterThan(0);
  });

  it("refuses a bad speculative setting, naming the field", async () => {
    await expect(speculative({ speculative: { method: "suffix", maxSpecTokens: 0 } })).rejects.toThrow(/speculative\.maxSpecTokens: must be an integer >= 1/);
    await expect(speculative({ speculative: { method: "eagle" as "suffix" } })).rejects.toThrow(/speculative\.method/);
  });
});
