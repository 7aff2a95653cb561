import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Rng } from "../../core/rng.js";
import { ensurePolicy } from "../../model/policy.js";
import { LlamaCppExecutor } from "../llamacpp-executor.js";
import type { SampledToken } from "../sampling.js";
import { L3StateTier } from "../kv/state-tier.js";
import { StatefulSessions, type ProgramGenerateResult } from "./stateful-sessions.js";

const INIT = { seed: 5, nEmbd: 32, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 96, contextLength: 1024 };
const SEED = 42;
const TEMP = 0.9;
const GEN = 8;
// Token ids of the tiny vocabulary (bytes, ASCII pieces and control tokens), no meaning needed.
const PROMPT1 = [1, 357, 300, 301, 302, 259, 310, 320, 330, 355, 358, 290];
const TOOL = [357, 303, 304, 305, 306, 358, 354];

let dir: string;
let modelPath: string;
let l3: L3StateTier;
let engineA: StatefulSessions;
let engineB: StatefulSessions;

const opts = () => ({ modelPath, sequences: 2, contextSize: 256, stopTokenIds: [] as number[], l3 });
const ids = (ts: readonly SampledToken[]) => ts.map((t) => t.id);
const lps = (ts: readonly SampledToken[]) => ts.map((t) => t.logprob);

function expectSame(a: readonly SampledToken[], b: readonly SampledToken[], tol = 1e-6): void {
  expect(ids(a)).toEqual(ids(b));
  const da = lps(a);
  const db = lps(b);
  for (let i = 0; i < da.length; i++) expect(Math.abs((da[i] as number) - (db[i] as number))).toBeLessThan(tol);
}

/** Turn 2 prompt: everything so far plus a tool result. */
const prompt2 = (gen1: readonly SampledToken[]) => [...PROMPT1, ...ids(gen1), ...TOOL];

/** The uninterrupted two-turn program, the reference every paused run must reproduce. */
let reference: { turn1: ProgramGenerateResult; turn2: ProgramGenerateResult };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "arbor-sessions-"));
  modelPath = ensurePolicy(dir, INIT).path;
  l3 = new L3StateTier({ capacityBytes: 16 * 1024 * 1024, dir: join(dir, "l3") });
  engineA = await StatefulSessions.load({ ...opts(), l2CapacityBytes: 16 * 1024 * 1024 });
  engineB = await StatefulSessions.load(opts());
  const rng = new Rng(SEED);
  const turn1 = await engineA.generate({ programId: "ref", promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, rng });
  const turn2 = await engineA.generate({ programId: "ref", promptTokenIds: prompt2(turn1.tokens), maxTokens: GEN, temperature: TEMP, rng });
  reference = { turn1, turn2 };
  await engineA.release("ref");
});

afterAll(async () => {
  await engineA?.close();
  await engineB?.close();
  l3?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("StatefulSessions", () => {
  it("samples exactly what LlamaCppExecutor samples for the same seed, and reuses the program's KV on turn 2", async () => {
    const exec = await LlamaCppExecutor.load({ modelPath, sequences: 1, contextSize: 256, maxWaiting: 0, stopTokenIds: [] });
    try {
      const r = await exec.generate({ promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, topP: 1, topLogprobs: 0, rng: new Rng(SEED) });
      expectSame(reference.turn1.tokens, r.tokens);
    } finally {
      await exec.close();
    }
    expect(reference.turn1).toMatchObject({ finishReason: "length", reusedTokens: 0, evaluatedTokens: PROMPT1.length, restoredFrom: "none" });
    // The last sampled token of turn 1 was never fed, so it is evaluated with the tool result.
    expect(reference.turn2).toMatchObject({ reusedTokens: PROMPT1.length + GEN - 1, evaluatedTokens: 1 + TOOL.length, restoredFrom: "L1" });
    expect(new Set(ids(reference.turn1.tokens)).size).toBeGreaterThan(1);
  });

  it("(b) paused to L2 between turns and restored on the same engine continues identically", async () => {
    const rng = new Rng(SEED);
    const t1 = await engineA.generate({ programId: "b", promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, rng });
    const paused = await engineA.pause("b", "L2");
    expect(paused).toMatchObject({ from: "L1", to: "L2", tokens: PROMPT1.length + GEN - 1 });
    expect(paused.bytes).toBeGreaterThan(0);
    expect(engineA.location("b")).toBe("L2");
    expect(engineA.residentTokens("b")).toEqual([]);
    const t2 = await engineA.generate({ programId: "b", promptTokenIds: prompt2(t1.tokens), maxTokens: GEN, temperature: TEMP, rng });
    expect(t2).toMatchObject({ restoredFrom: "L2", reusedTokens: PROMPT1.length + GEN - 1, evaluatedTokens: 1 + TOOL.length });
    expectSame(t1.tokens, reference.turn1.tokens);
    expectSame(t2.tokens, reference.turn2.tokens);
    expect(engineA.location("b")).toBe("L1");
    await engineA.release("b");
  });

  it("(c) paused to L3 and restored on a second engine continues identically; the L3 copy is consumed", async () => {
    const rng = new Rng(SEED);
    const t1 = await engineA.generate({ programId: "c", promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, rng });
    await engineA.pause("c", "L3");
    expect(engineB.location("c")).toBe("L3");
    expect(l3.peek("c")?.tokenIds).toEqual([...PROMPT1, ...ids(t1.tokens).slice(0, -1)]);
    const t2 = await engineB.generate({ programId: "c", promptTokenIds: prompt2(t1.tokens), maxTokens: GEN, temperature: TEMP, rng });
    expect(t2).toMatchObject({ restoredFrom: "L3", reusedTokens: PROMPT1.length + GEN - 1, evaluatedTokens: 1 + TOOL.length });
    expectSame(t2.tokens, reference.turn2.tokens);
    expect(l3.peek("c")).toBeUndefined();
    expect(engineB.location("c")).toBe("L1");
    await engineB.release("c");
  });

  it("(d) paused mid-generation after k tokens and resumed on another engine continues identically", async () => {
    const rng = new Rng(SEED);
    const k = 3;
    let pausing: Promise<unknown> | undefined;
    const part = await engineA.generate({
      programId: "d",
      promptTokenIds: PROMPT1,
      maxTokens: GEN,
      temperature: TEMP,
      rng,
      onToken: (_t, i) => {
        if (i === k - 1) pausing = engineA.pause("d", "L3");
      },
    });
    await pausing;
    expect(part.finishReason).toBe("paused");
    expect(part.tokens).toHaveLength(k);
    expect(engineA.location("d")).toBe("L3");
    // Resume: the prompt grows by the tokens produced so far; only the last one is evaluated.
    const rest = await engineB.generate({ programId: "d", promptTokenIds: [...PROMPT1, ...ids(part.tokens)], maxTokens: GEN - k, temperature: TEMP, rng });
    expect(rest).toMatchObject({ restoredFrom: "L3", evaluatedTokens: 1, finishReason: "length" });
    const t1 = [...part.tokens, ...rest.tokens];
    expectSame(t1, reference.turn1.tokens);
    const t2 = await engineB.generate({ programId: "d", promptTokenIds: prompt2(t1), maxTokens: GEN, temperature: TEMP, rng });
    expectSame(t2.tokens, reference.turn2.tokens);
    await engineB.release("d");
  });

  it("drop forces a full recompute that gives the same tokens", async () => {
    const rng = new Rng(SEED);
    const t1 = await engineA.generate({ programId: "e", promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, rng });
    expect(await engineA.pause("e", "drop")).toMatchObject({ from: "L1", to: "none", tokens: 0 });
    expect(engineA.location("e")).toBe("none");
    const p2 = prompt2(t1.tokens);
    const t2 = await engineA.generate({ programId: "e", promptTokenIds: p2, maxTokens: GEN, temperature: TEMP, rng });
    expect(t2).toMatchObject({ restoredFrom: "none", reusedTokens: 0, evaluatedTokens: p2.length });
    // One prompt batch instead of prefill + decode steps: same tokens, logprobs equal to float noise.
    expectSame(t2.tokens, reference.turn2.tokens);
    await engineA.release("e");
  });

  it("a prompt that rewrites history keeps only the common prefix", async () => {
    const rng = new Rng(SEED);
    await engineA.generate({ programId: "f", promptTokenIds: PROMPT1, maxTokens: 2, temperature: TEMP, rng });
    const edited = [...PROMPT1.slice(0, 5), 300, 300, 300];
    const r = await engineA.generate({ programId: "f", promptTokenIds: edited, maxTokens: 2, temperature: 0, rng });
    expect(r).toMatchObject({ reusedTokens: 5, evaluatedTokens: 3 });
    expect(engineA.residentTokens("f")).toEqual([...edited, r.tokens[0]?.id]);
    await engineA.release("f");
  });

  it("moves a paused program between L2 and L3 without loading it", async () => {
    const rng = new Rng(SEED);
    const t1 = await engineA.generate({ programId: "g", promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, rng });
    await engineA.pause("g", "L2");
    expect(await engineA.pause("g", "L3")).toMatchObject({ from: "L2", to: "L3", tokens: PROMPT1.length + GEN - 1 });
    expect(engineB.location("g")).toBe("L3");
    expect(await engineB.restore("g")).toBe("L3");
    const t2 = await engineB.generate({ programId: "g", promptTokenIds: prompt2(t1.tokens), maxTokens: GEN, temperature: TEMP, rng });
    expect(t2).toMatchObject({ restoredFrom: "L1", evaluatedTokens: 1 + TOOL.length });
    expectSame(t2.tokens, reference.turn2.tokens);
    await engineB.release("g");
  });

  it("evicts the least recently used idle program to L2 when every sequence is taken, and restores it later", async () => {
    const rngX = new Rng(SEED);
    const x1 = await engineA.generate({ programId: "x", promptTokenIds: PROMPT1, maxTokens: GEN, temperature: TEMP, rng: rngX });
    await engineA.generate({ programId: "y", promptTokenIds: [1, 300], maxTokens: 2, temperature: 0, rng: new Rng(1) });
    const before = engineA.stats().evictions;
    await engineA.generate({ programId: "z", promptTokenIds: [1, 301], maxTokens: 2, temperature: 0, rng: new Rng(1) });
    expect(engineA.stats().evictions).toBe(before + 1);
    expect([engineA.location("x"), engineA.location("y"), engineA.location("z")]).toEqual(["L2", "L1", "L1"]);
    const x2 = await engineA.generate({ programId: "x", promptTokenIds: prompt2(x1.tokens), maxTokens: GEN, temperature: TEMP, rng: rngX });
    expect(x2.restoredFrom).toBe("L2");
    expectSame(x2.tokens, reference.turn2.tokens);
    expect(engineA.location("y")).toBe("L2");
    for (const p of ["x", "y", "z"]) await engineA.release(p);
    expect(engineA.stats().freeSequences).toBe(2);
  });

  it("a shared L3 prefix saved by one engine seeds a new program on another", async () => {
    const other = await StatefulSessions.load({ ...opts(), l3PrefixMinTokens: 4 });
    try {
      const base = [1, 358, 340, 341, 342, 343, 344, 345];
      await engineA.generate({ programId: "sys", promptTokenIds: base, maxTokens: 1, temperature: 0, rng: new Rng(1) });
      await engineA.pause("sys", "L3");
      const prompt = [...base, 346, 347];
      const shared = await other.generate({ programId: "n1", promptTokenIds: prompt, maxTokens: 4, temperature: 0, rng: new Rng(1) });
      expect(shared).toMatchObject({ restoredFrom: "L3", reusedTokens: base.length, evaluatedTokens: 2 });
      expect(l3.peek("sys")).toBeDefined(); // a prefix is copied, not consumed
      const fresh = await engineB.generate({ programId: "n2", promptTokenIds: prompt, maxTokens: 4, temperature: 0, rng: new Rng(1) });
      expect(fresh.reusedTokens).toBe(0);
      expectSame(shared.tokens, fresh.tokens);
      await engineB.release("n2");
      await engineA.release("sys");
      expect(l3.peek("sys")).toBeUndefined();
    } finally {
      await other.close();
    }
  });

  it("a full L2 keeps the program resident on pause and falls back to drop on eviction", async () => {
    const small = await StatefulSessions.load({ ...opts(), sequences: 1, l3: undefined, l2CapacityBytes: 1024 });
    try {
      await small.generate({ programId: "p", promptTokenIds: PROMPT1, maxTokens: 2, temperature: 0, rng: new Rng(1) });
      await expect(small.pause("p", "L2")).rejects.toThrow(/L2 KV store is full \(limit 1024 bytes\)/);
      expect(small.location("p")).toBe("L1");
      await small.generate({ programId: "q", promptTokenIds: PROMPT1, maxTokens: 2, temperature: 0, rng: new Rng(1) });
      expect(small.location("p")).toBe("none");
      await expect(small.pause("p", "L3")).rejects.toThrow(/no L3 store is configured/);
    } finally {
      await small.close();
    }
  });

  it("rejects bad requests with the field and reason, and refuses a state from an incompatible engine", async () => {
    const rng = new Rng(1);
    await expect(engineA.generate({ programId: "", promptTokenIds: [1], maxTokens: 1, temperature: 0, rng })).rejects.toThrow(/programId/);
    await expect(engineA.generate({ programId: "v", promptTokenIds: [], maxTokens: 1, temperature: 0, rng })).rejects.toThrow(/promptTokenIds/);
    await expect(engineA.generate({ programId: "v", promptTokenIds: [99999], maxTokens: 1, temperature: 0, rng })).rejects.toThrow(/outside the vocabulary/);
    await expect(engineA.generate({ programId: "v", promptTokenIds: [1], maxTokens: 300, temperature: 0, rng })).rejects.toThrow(/exceeds the context \(256\)/);
    await expect(engineA.pause("nobody", "L2")).rejects.toThrow(/unknown program nobody/);
    expect(await engineA.restore("ghost")).toBe("none");
    expect(engineA.stats().freeSequences).toBe(2);

    const one = await StatefulSessions.load({ ...opts(), sequences: 1 });
    try {
      await engineA.generate({ programId: "w", promptTokenIds: PROMPT1, maxTokens: 2, temperature: 0, rng });
      await engineA.pause("w", "L3");
      await expect(one.generate({ programId: "w", promptTokenIds: PROMPT1, maxTokens: 1, temperature: 0, rng })).rejects.toThrow(
        /saved by an incompatible engine .*sequences=2/,
      );
      expect(l3.peek("w")).toBeDefined();
      expect(one.stats().freeSequences).toBe(1);
    } finally {
      await one.close();
      await engineA.release("w");
    }
  });

  it("leaves no state files behind", () => {
    expect(l3.keys()).toEqual([]);
    expect(readdirSync(join(dir, "l3"))).toEqual([]);
    expect(existsSync(join(dir, "l3"))).toBe(true);
  });
});
