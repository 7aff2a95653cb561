import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { evaluateTokens, loadLlamaModel, openLlamaContext } from "./llama-context.js";
import { NextTokenReader } from "./llama-next-token-reader.js";
import { guardOutputReorder } from "./llama-output-guard.js";

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * llama.cpp's output buffer as node-llama-cpp's native context exposes it: a decode leaves the rows
 * in ubatch order with the swaps pending, and each read first applies the pending swaps then clears
 * them, not atomically (the awaits stand for two worker threads interleaving in output_reorder).
 */
class LazyReorderContext {
  rows: string[] = [];
  private swaps: [number, number][] = [];
  /** Sequence ids in the order the batch was added to llama.cpp, and each one's token count. */
  added: [number, number][] = [];
  started = 0;
  finished = 0;
  maxInFlight = 0;

  initBatch(): void {
    this.added = [];
  }

  /** Each logit row's index in the batch, as llama.cpp numbers them. */
  addToBatch(sequenceId: number, _first: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array {
    const before = this.added.reduce((n, [, len]) => n + len, 0);
    this.added.push([sequenceId, tokens.length]);
    return logitIndexes.map((i) => before + i);
  }

  /**
   * Outputs of batch rows 0..n-1 named `out${i}`; when the batch holds an item of several tokens
   * (`n` defaults to the rows added), written rotated by one with the swaps to undo it.
   */
  async decodeBatch(n = this.added.reduce((k, [, len]) => k + len, 0)): Promise<void> {
    await tick();
    const rotated = this.added.length === 0 || this.added.some(([, len]) => len > 1);
    this.rows = Array.from({ length: n }, (_, i) => `out${rotated ? (i + 1) % n : i}`);
    this.swaps = [];
    if (!rotated) return;
    const order = Array.from({ length: n }, (_, i) => (i + 1) % n);
    for (let i = 0; i < n - 1; i++) {
      let min = i;
      for (let j = i + 1; j < n; j++) if ((order[j] as number) < (order[min] as number)) min = j;
      if (min === i) continue;
      [order[i], order[min]] = [order[min] as number, order[i] as number];
      this.swaps.push([i, min]);
    }
  }

  async sampleToken(row: number): Promise<string> {
    this.started++;
    this.maxInFlight = Math.max(this.maxInFlight, this.started - this.finished);
    for (let s = 0; s < this.swaps.length; s++) {
      const [i, j] = this.swaps[s] as [number, number];
      await tick();
      [this.rows[i], this.rows[j]] = [this.rows[j] as string, this.rows[i] as string];
    }
    await tick();
    this.swaps = [];
    const out = this.rows[row] as string;
    this.finished++;
    return out;
  }
}

function guarded(): LazyReorderContext {
  const native = new LazyReorderContext();
  guardOutputReorder({ _ctx: native } as unknown as LlamaContext);
  return native;
}

describe("guardOutputReorder", () => {
  it("gives every sequence of a batch its own row when they are sampled at once", async () => {
    const ctx = guarded();
    for (const n of [2, 3, 5]) {
      // node-llama-cpp's dispatch: decode, then sample every sequence of the batch in parallel.
      await ctx.decodeBatch(n);
      const rows = await Promise.all(Array.from({ length: n }, (_, i) => ctx.sampleToken(i)));
      expect(rows).toEqual(Array.from({ length: n }, (_, i) => `out${i}`));
    }
  });

  it("runs the first read after a decode alone, and the batch's other reads together", async () => {
    const ctx = guarded();
    await ctx.decodeBatch(3);
    const first = ctx.sampleToken(0);
    const rest = [ctx.sampleToken(1), ctx.sampleToken(2)];
    await tick();
    // The others wait while the first one reorders.
    expect(ctx.started).toBe(1);
    await Promise.all([first, ...rest]);
    expect(ctx.maxInFlight).toBe(2);
  });

  it("adds a batch of one-token steps in ascending sequence order and reads its rows at once", async () => {
    const ctx = guarded();
    ctx.initBatch();
    // node-llama-cpp adds the sequences in the order they queued their steps.
    const rows = [2, 0, 3, 1].map((seq) => ctx.addToBatch(seq, 10, Uint32Array.of(7), Uint32Array.of(0)));
    await ctx.decodeBatch();
    expect(ctx.added.map(([seq]) => seq)).toEqual([0, 1, 2, 3]);
    // Each caller's logit row is where its sequence went.
    expect(rows.map((r) => [...r])).toEqual([[2], [0], [3], [1]]);
    const reads = rows.map((r) => ctx.sampleToken(r[0] as number));
    await tick();
    expect(ctx.started).toBe(4);
    expect(await Promise.all(reads)).toEqual(["out2", "out0", "out3", "out1"]);
  });

  it("keeps a batch with a prompt in node-llama-cpp's order, its first read alone", async () => {
    const ctx = guarded();
    ctx.initBatch();
    const rows = [ctx.addToBatch(1, 0, Uint32Array.of(5, 6, 7), Uint32Array.of(2)), ctx.addToBatch(0, 4, Uint32Array.of(8), Uint32Array.of(0))];
    await ctx.decodeBatch();
    expect(ctx.added.map(([seq]) => seq)).toEqual([1, 0]);
    expect(rows.map((r) => [...r])).toEqual([[2], [3]]);
    const reads = rows.map((r) => ctx.sampleToken(r[0] as number));
    await tick();
    expect(ctx.started).toBe(1);
    expect(await Promise.all(reads)).toEqual(["out2", "out3"]);
  });

  it("refuses a context without the native calls it wraps, naming them", () => {
    expect(() => guardOutputReorder({ _ctx: {} } as unknown as LlamaContext)).toThrow(/initBatch.*sampleToken/);
  });

  it("on llama.cpp: two prompts of unequal length sampled in one batch get their own distributions", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-output-guard-"));
    const { model, context } = await openLlamaContext({
      modelPath: ensurePolicy(dir, { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 }).path,
      sequences: 2,
      contextSize: 64,
    });
    try {
      const vocab = new Vocab();
      // The shorter prompt's last token goes in the first ubatch, the longer one's in the second:
      // llama.cpp's outputs come out of batch order and are reordered on the first read.
      const long = [vocab.bosId, ...vocab.encode("What is 2+3? Answer briefly.")];
      const short = [vocab.bosId, ...vocab.encode("Name a colour.")];
      const [a, b] = [context.getSequence(), context.getSequence()];
      const alone = [await evaluateTokens(a, long, true), await evaluateTokens(b, short, true)];
      for (let k = 0; k < 20; k++) {
        await a.clearHistory();
        await b.clearHistory();
        const both = await Promise.all([evaluateTokens(a, long, true), evaluateTokens(b, short, true)]);
        both.forEach((got, i) => {
          for (const [id, p] of alone[i]!) expect(got!.get(id)).toBeCloseTo(p, 6);
        });
      }
    } finally {
      await context.dispose();
      await model.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("on llama.cpp: four sequences stepping together, in whatever order they queue, read their rows at once and get their own distributions", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-output-guard-"));
    const model = await loadLlamaModel(ensurePolicy(dir, { seed: 1, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 192, contextLength: 2048 }).path, false, false);
    const context = await model.createContext({ contextSize: 64, sequences: 4, threads: 1 });
    // The native reads as llama.cpp sees them, counted beneath the guard.
    const native = (context as unknown as { _ctx: { sampleToken: (...a: unknown[]) => Promise<unknown> } })._ctx;
    const read = native.sampleToken.bind(native);
    let inFlight = 0;
    let maxInFlight = 0;
    Object.defineProperty(native, "sampleToken", {
      value: async (...a: unknown[]) => {
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        try {
          return await read(...a);
        } finally {
          inFlight--;
        }
      },
      configurable: true,
      writable: true,
    });
    guardOutputReorder(context);
    try {
      const vocab = new Vocab();
      const prompts = ["What is 2+3?", "Name a colour.", "Hi", "Count to five, slowly."].map((t) => [vocab.bosId, ...vocab.encode(t)]);
      const seqs = prompts.map(() => context.getSequence());
      // The executor's decode step: with its peers known, the four sequences step in one batch.
      const run = async (i: number, peers: number): Promise<Map<number, number>[]> => {
        const reader = new NextTokenReader(seqs[i]!, () => peers);
        try {
          const out = [await reader.next(prompts[i]!)];
          for (const token of [40, 41, 42]) out.push(await reader.nextAfter(token));
          return out.map((pairs) => new Map(Array.from({ length: pairs.length / 2 }, (_, k) => [pairs[2 * k]!, pairs[2 * k + 1]!])));
        } finally {
          reader.dispose();
        }
      };
      const alone: Map<number, number>[][] = [];
      for (let i = 0; i < seqs.length; i++) {
        await seqs[i]!.clearHistory();
        alone.push(await run(i, 1));
      }
      maxInFlight = 0;
      for (let k = 0; k < 10; k++) {
        for (const seq of seqs) await seq.clearHistory();
        // The prompts queue in this order (a batch read the careful way); the steps in whatever
        // order their reads finish, and reach llama.cpp in ascending sequence order.
        const order = [2, 0, 3, 1];
        const got = await Promise.all(order.map((i) => run(i, order.length)));
        order.forEach((i, j) => {
          got[j]!.forEach((dist, step) => {
            for (const [id, p] of alone[i]![step]!) expect(dist.get(id)).toBeCloseTo(p, 6);
          });
        });
      }
      // All four rows of a step batch were read at once (the careful way reads one, then three).
      expect(maxInFlight).toBe(4);
    } finally {
      await context.dispose();
      await model.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
