// The draft model drafter on llama.cpp: greedy proposals equal the model's own argmax decoding, whatever the
// sequence held before (prefix kept, divergence erased); refresh swaps the GGUF; limits and vocabularies checked.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext, LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configFromGguf, readGguf, writeGguf } from "../../model/gguf.js";
import { tokenizerSpecFromGguf } from "../../model/gguf-tokenizer.js";
import { ensurePolicy } from "../../model/policy.js";
import { Vocab } from "../../model/vocab.js";
import { evaluateDistributions, openLlamaContext } from "../llama-context.js";
import { DraftModelDrafter } from "./draft-model.js";

const INIT = { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 };
const vocab = new Vocab();
const CTX = 128;
const prompt = (text: string): number[] => [vocab.bosId, ...vocab.encode(text)];

let dir: string;
let policyPath: string;
let shallowPath: string;
const open: { model: LlamaModel; context: LlamaContext }[] = [];
const drafters: DraftModelDrafter[] = [];

async function drafter(path: string, sequences = 2): Promise<DraftModelDrafter> {
  const d = await DraftModelDrafter.load({ modelPath: path, sequences, contextSize: CTX, vocabSize: vocab.size });
  drafters.push(d);
  return d;
}

/** The model's greedy continuation by argmax over its full distributions, on a fresh context. */
async function greedy(path: string, tokens: number[], k: number): Promise<number[]> {
  const o = await openLlamaContext({ modelPath: path, sequences: 1, contextSize: CTX });
  open.push(o);
  const seq = o.context.getSequence();
  const out: number[] = [];
  let feed = tokens;
  for (let i = 0; i < k; i++) {
    const [dist] = await evaluateDistributions(seq, feed, 1, () => undefined);
    let best = -1;
    let bestP = -1;
    for (const [id, p] of dist!) if (p > bestP || (p === bestP && id < best)) [best, bestP] = [id, p];
    out.push(best);
    feed = [best];
  }
  return out;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "arbor-draft-model-"));
  policyPath = ensurePolicy(dir, INIT).path;
  // A one-block draft cut from the policy, with the policy's vocabulary.
  const f = readGguf(policyPath);
  const config = { ...configFromGguf(f.metadata, policyPath), nLayer: 1 };
  shallowPath = join(dir, "draft-v0.gguf");
  writeGguf(shallowPath, { config, tokenizer: tokenizerSpecFromGguf(f.metadata, policyPath), tensors: f.tensors.filter((t) => !t.name.startsWith("blk.1.")) });
});

afterAll(async () => {
  for (const d of drafters) await d.close();
  for (const o of open) {
    await o.context.dispose();
    await o.model.dispose();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("DraftModelDrafter", () => {
  it("proposes the model's greedy continuation, also after its sequence held other tokens", async () => {
    const d = await drafter(policyPath);
    const a = prompt("one two three one two three");
    expect(await d.draft("r1", a, 6)).toEqual(await greedy(policyPath, a, 6));
    // The request grew by tokens other than the draft: the prefix is kept, the rest erased and evaluated.
    const b = [...a, ...vocab.encode(" four five")];
    expect(await d.draft("r1", b, 6)).toEqual(await greedy(policyPath, b, 6));
    // A context that diverges early (the sequence's tail must be erased).
    const c = prompt("one two X");
    expect(await d.draft("r1", c, 4)).toEqual(await greedy(policyPath, c, 4));
    expect(await d.draft("r1", c, 0)).toEqual([]);
  });

  it("drafts a batch of requests together: one llama.cpp decode per draft position, the same proposals as alone", async () => {
    const d = await drafter(policyPath, 3);
    // Count the context's llama_decode calls (node-llama-cpp's native context; test-only instrumentation).
    const native = (d as unknown as { loaded: { context: { _ctx: { decodeBatch: () => Promise<void> } } } }).loaded.context._ctx;
    const decode = native.decodeBatch.bind(native);
    let decodes = 0;
    native.decodeBatch = () => {
      decodes++;
      return decode();
    };
    const contexts = [prompt("one two three one two three"), prompt("Name a colour."), prompt("abc abc abc")];
    const want = await Promise.all(contexts.map((c) => greedy(policyPath, c, 5)));
    const batch = await d.draftBatch(contexts.map((tokens, i) => ({ requestId: `r${i}`, tokens })), 5);
    expect(batch).toEqual(want);
    // Three requests, five positions: five decodes (the first carries each request's whole prompt).
    expect(decodes).toBe(5);
    // Next step: each request grew by its first proposal; the sequences keep their prefix.
    decodes = 0;
    const grown = contexts.map((c, i) => [...c, want[i]![0]!]);
    expect(await d.draftBatch(grown.map((tokens, i) => ({ requestId: `r${i}`, tokens })), 3)).toEqual(await Promise.all(grown.map((c) => greedy(policyPath, c, 3))));
    expect(decodes).toBe(3);
    await expect(d.draftBatch([{ requestId: "r0", tokens: contexts[0]! }, { requestId: "r0", tokens: contexts[0]! }], 2)).rejects.toThrow(/r0 appears twice/);
  });

  it("refresh swaps the GGUF the drafts come from", async () => {
    const d = await drafter(policyPath);
    const a = prompt("Name a colour.");
    await d.draft("r", a, 5);
    await d.refresh(shallowPath);
    expect(d.modelPath).toBe(shallowPath);
    expect(await d.draft("r", a, 5)).toEqual(await greedy(shallowPath, a, 5));
    await expect(d.refresh(join(dir, "missing.gguf"))).rejects.toThrow(/missing\.gguf/);
    expect(d.modelPath).toBe(shallowPath);
  });

  it("bounds its sequences and the context, and refuses another vocabulary", async () => {
    const d = await drafter(policyPath, 1);
    await d.draft("a", prompt("hi"), 2);
    await expect(d.draft("b", prompt("hi"), 2)).rejects.toThrow(/all 1 sequences are in use/);
    d.release("a");
    expect(await d.draft("b", prompt("hi"), 2)).toHaveLength(2);
    const long = Array.from({ length: CTX - 2 }, (_, i) => (i === 0 ? vocab.bosId : 40));
    expect(await d.draft("b", long, 8)).toHaveLength(2);
    await expect(DraftModelDrafter.load({ modelPath: policyPath, sequences: 1, contextSize: CTX, vocabSize: vocab.size + 1 })).rejects.toThrow(/a draft must share the policy's vocabulary/);
  });
});
