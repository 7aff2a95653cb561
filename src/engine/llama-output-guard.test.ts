import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LlamaContext } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { ensurePolicy } from "../model/policy.js";
import { Vocab } from "../model/vocab.js";
import { evaluateTokens, openLlamaContext } from "./llama-context.js";
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
  started = 0;
  finished = 0;
  maxInFlight = 0;

  /** Outputs of batch rows 0..n-1 named `out${i}`, written rotated by one with the swaps to undo it. */
  async decodeBatch(n: number): Promise<void> {
    await tick();
    this.rows = Array.from({ length: n }, (_, i) => `out${(i + 1) % n}`);
    this.swaps = [];
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

  it("refuses a context without the native calls it wraps", () => {
    expect(() => guardOutputReorder({ _ctx: {} } as unknown as LlamaContext)).toThrow(/sampleToken/);
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
});
