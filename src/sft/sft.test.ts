import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { configFromGguf, readGguf } from "../model/gguf.js";
import { runSft, sftSplit, sftTree, truncateToContext, type SftOptions, type SftStep } from "./sft.js";
import { goldenSample } from "./golden-samples.js";
import { ArborChatFormat } from "../model/arbor-chat-format.js";
import { stopTokenIds } from "../model/chat-template.js";
import { Vocab } from "../model/vocab.js";

const dir = mkdtempSync(join(tmpdir(), "arbor-sft-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = (out: string, onStep?: (s: SftStep) => void): SftOptions => ({
  env: "calc",
  tasks: 4,
  taskSeed: 11,
  evalTasks: 2,
  evalEvery: 4,
  init: { seed: 3, nEmbd: 16, nLayer: 1, nHead: 2, nHeadKv: 2, nFf: 32, contextLength: 1024 },
  steps: 8,
  batchSize: 2,
  lr: 2e-2,
  seed: 5,
  out,
  clock: new VirtualClock(0),
  ...(onStep ? { onStep } : {}),
});

describe("runSft", () => {
  it("drives the loss on golden assistant tokens down and writes a GGUF llama.cpp's loader reads", async () => {
    const steps: SftStep[] = [];
    const out = join(dir, "a.gguf");
    const r = await runSft(base(out, (s) => steps.push(s)));
    expect(steps.map((s) => s.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(steps.filter((s) => s.evalLoss !== undefined).map((s) => s.step)).toEqual([4, 8]);
    expect(r.firstLoss).toBeGreaterThan(Math.log(new Vocab().size) * 0.8); // near-uniform at init
    expect(r.lastLoss).toBeLessThan(r.firstLoss * 0.7);
    const held = steps.filter((s) => s.evalLoss !== undefined).map((s) => s.evalLoss as number);
    expect(held[1]).toBeLessThan(r.firstLoss);
    const file = readGguf(out);
    expect(configFromGguf(file.metadata)).toMatchObject({ nEmbd: 16, nLayer: 1, nHead: 2, nVocab: new Vocab().size });
    expect(file.metadata.get("arbor.policy_version")).toBe(0);
    expect(JSON.parse(file.metadata.get("arbor.sft") as string)).toMatchObject({ env: "calc", tasks: 4, steps: 8, step: 8, seed: 5 });
  });

  it("is deterministic for its seeds, and continues from a GGUF", async () => {
    const a = join(dir, "a.gguf");
    const b = join(dir, "b.gguf");
    await runSft(base(b));
    expect(readFileSync(b).equals(readFileSync(a))).toBe(true);
    const more = await runSft({ ...base(join(dir, "c.gguf")), init: { path: a }, steps: 2 });
    const fresh = await runSft({ ...base(join(dir, "d.gguf")), steps: 2 });
    expect(more.firstLoss).toBeLessThan(fresh.firstLoss);
  });

  it("weights every assistant token of a batch equally", () => {
    const vocab = new Vocab();
    const samples = [0, 1].map((i) => goldenSample([{ role: "user", content: `q${i}` }, { role: "assistant", content: i === 0 ? "ab" : "abcdef" }], { format: new ArborChatFormat(vocab), stopIds: stopTokenIds(vocab) }));
    const tree = sftTree(samples);
    // 2 + 1 and 6 + 1 tokens (content and <|end|>): 10 terms of weight 1/10.
    expect(tree.terms.weight).toHaveLength(10);
    for (const w of tree.terms.weight) expect(w).toBeCloseTo(0.1, 7);
  });

  it("stops after the current step when its signal aborts, and still writes the weights so far", async () => {
    const stop = new AbortController();
    const out = join(dir, "stopped.gguf");
    const r = await runSft({ ...base(out, (s) => (s.step === 3 ? stop.abort() : undefined)), signal: stop.signal });
    expect(r).toMatchObject({ steps: 3, stopped: true });
    expect(JSON.parse(readGguf(out).metadata.get("arbor.sft") as string)).toMatchObject({ step: 3, steps: 8 });
  });

  it("a cosine run differs from a constant one and records its schedule in the GGUF", async () => {
    const out = join(dir, "cos.gguf");
    await runSft({ ...base(out), schedule: "cosine", warmupSteps: 2 });
    expect(readFileSync(out).equals(readFileSync(join(dir, "a.gguf")))).toBe(false);
    expect(JSON.parse(readGguf(out).metadata.get("arbor.sft") as string)).toMatchObject({ schedule: "cosine", warmupSteps: 2, lr: 2e-2 });
  });

  it("rejects bad options with the field named", async () => {
    await expect(runSft({ ...base(join(dir, "x.gguf")), warmupSteps: 8 })).rejects.toThrow(/warmupSteps must be an integer in \[0, steps\), got 8/);
    await expect(runSft({ ...base(join(dir, "x.gguf")), batchSize: 5 })).rejects.toThrow(/batchSize \(5\) must not exceed tasks \(4\)/);
    await expect(runSft({ ...base(join(dir, "x.gguf")), steps: 0 })).rejects.toThrow(/steps must be an integer >= 1/);
    await expect(runSft({ ...base(join(dir, "x.gguf")), lr: 0 })).rejects.toThrow(/lr must be > 0/);
  });

  it("swe-mini: training and held-out tasks come from one seeded order of the pool and never overlap", () => {
    const { train, held } = sftSplit({ env: "swe-mini", tasks: 20, taskSeed: 1000, evalTasks: 4 });
    expect(train).toHaveLength(20);
    expect(held).toHaveLength(4);
    const key = (s: { tokenIds: number[] }): string => s.tokenIds.join(",");
    const seen = new Set(train.map(key));
    for (const h of held) expect(seen.has(key(h))).toBe(false);
    expect(() => sftSplit({ env: "swe-mini", tasks: 22, taskSeed: 1000, evalTasks: 4 })).toThrow("sft: swe-mini has 24 tasks: tasks (22) + held-out tasks (4) must not exceed it");
  });

  it("cuts conversations longer than the model's context to their first contextLength tokens (search-qa)", async () => {
    const s = { tokenIds: [1, 2, 3, 4, 5, 6], lossMask: [0, 0, 1, 1, 0, 1] };
    expect(truncateToContext(s, 6)).toBe(s);
    expect(truncateToContext(s, 4)).toEqual({ tokenIds: [1, 2, 3, 4], lossMask: [0, 0, 1, 1] });
    expect(truncateToContext(s, 2)).toBeUndefined();
    // search-qa's goldens run to ~2,600 tokens: with a 1,024-token model most are cut, and training runs.
    const r = await runSft({ ...base(join(dir, "qa.gguf")), env: "search-qa", tasks: 4, evalTasks: 1, steps: 1, batchSize: 4 });
    expect(r.samples).toBe(4);
    expect(r.truncated).toBeGreaterThan(0);
    expect(Number.isFinite(r.lastLoss)).toBe(true);
  });
});
