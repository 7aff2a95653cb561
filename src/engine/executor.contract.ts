// The shared contract suite every Executor must pass (executor.ts): what the HTTP engine relies on,
// whatever produces the tokens. Call `describeExecutorContract` from each implementation's test file
// (executor-registry.test.ts runs it for every registered kind) with a harness that opens a fresh
// executor.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Rng } from "../core/rng.js";
import type { Executor, GenerateRequest, GenerateResult } from "./executor.js";
import { AbortedError } from "./sequence-pool.js";

export interface ExecutorHarness {
  /** A fresh executor (closed by the suite). */
  open(): Promise<Executor>;
  /** Token ids that end a generation on this executor. */
  stopTokenIds: readonly number[];
  /** Tokens of a short, valid prompt (BOS and markers in place). */
  prompt: readonly number[];
  /**
   * True when the same request with the same seed gives the same tokens (executors that sample
   * from a model's distribution with the request's Rng; not the cost model, which draws its own).
   */
  deterministic: boolean;
}

/** Register the contract tests for one executor implementation. */
export function describeExecutorContract(name: string, harness: ExecutorHarness): void {
  describe(`Executor contract: ${name}`, () => {
    let ex: Executor;
    let closed = false;
    const req = (o: Partial<GenerateRequest> = {}): GenerateRequest => ({
      promptTokenIds: harness.prompt,
      maxTokens: 6,
      temperature: 1,
      topP: 1,
      topLogprobs: 2,
      rng: new Rng(7),
      ...o,
    });

    beforeEach(async () => {
      ex = await harness.open();
      closed = false;
    });
    afterEach(async () => {
      if (!closed) await ex.close();
    });

    it("has a positive vocabulary, context and sequence count, and tokenizes inside its vocabulary", () => {
      for (const n of [ex.vocabSize, ex.contextSize, ex.sequences]) expect(Number.isInteger(n) && n >= 1).toBe(true);
      const ids = ex.tokenize("hello world 42");
      expect(ids.length).toBeGreaterThan(0);
      for (const id of ids) expect(Number.isInteger(id) && id >= 0 && id < ex.vocabSize).toBe(true);
      for (const id of harness.prompt) expect(id).toBeLessThan(ex.vocabSize);
    });

    it("exposes a tokenizer, when it has one, that agrees with its vocabulary, tokenize and stop tokens", () => {
      const tok = ex.tokenizer;
      if (!tok) return;
      expect(tok.size).toBe(ex.vocabSize);
      expect(tok.encode("hello world 42")).toEqual(ex.tokenize("hello world 42"));
      expect(tok.decode(tok.encode("hello world 42"))).toBe("hello world 42");
      for (const id of harness.stopTokenIds) expect(tok.stopIds).toContain(id);
    });

    it("refuses requests no executor can run with a RangeError naming the problem", async () => {
      await expect(ex.generate(req({ promptTokenIds: [] }))).rejects.toThrow(RangeError);
      await expect(ex.generate(req({ maxTokens: 0 }))).rejects.toThrow(/maxTokens must be >= 1/);
      await expect(ex.generate(req({ maxTokens: ex.contextSize }))).rejects.toThrow(/exceeds the context/);
      await expect(ex.generate(req({ promptTokenIds: [...harness.prompt, ex.vocabSize] }))).rejects.toThrow(/outside the vocabulary/);
      await expect(ex.generate(req({ promptTokenIds: [...harness.prompt, -1] }))).rejects.toThrow(RangeError);
    });

    it("returns at most maxTokens tokens in the vocabulary, streamed in order, with a finish reason that matches", async () => {
      for (const maxTokens of [1, 6]) {
        const streamed: number[] = [];
        const r = await ex.generate(req({ maxTokens, onToken: (t) => streamed.push(t.id) }));
        checkResult(r, maxTokens, harness.stopTokenIds, ex.vocabSize, 2);
        expect(streamed).toEqual(r.tokens.map((t) => t.id));
      }
    });

    it("reports no more alternatives per token than asked", async () => {
      const r = await ex.generate(req({ topLogprobs: 0 }));
      for (const t of r.tokens) expect(t.top).toHaveLength(0);
    });

    it.runIf(harness.deterministic)("gives the same tokens for the same request and seed", async () => {
      const a = await ex.generate(req({ rng: new Rng(11) }));
      const b = await ex.generate(req({ rng: new Rng(11) }));
      expect(b.tokens.map((t) => t.id)).toEqual(a.tokens.map((t) => t.id));
      expect(b.finishReason).toBe(a.finishReason);
    });

    it("ends a request whose signal is already aborted without generating", async () => {
      const ac = new AbortController();
      ac.abort();
      const outcome = await ex.generate(req({ signal: ac.signal })).then(
        (r) => r,
        (e: unknown) => e,
      );
      if (outcome instanceof Error) expect(outcome).toBeInstanceOf(AbortedError);
      else expect(outcome).toMatchObject({ finishReason: "abort", tokens: [] });
    });

    it("serves more concurrent requests than sequences and is idle afterwards", async () => {
      const n = ex.sequences + 1;
      const results = await Promise.all(Array.from({ length: n }, (_, i) => ex.generate(req({ rng: new Rng(100 + i), maxTokens: 3 }))));
      for (const r of results) checkResult(r, 3, harness.stopTokenIds, ex.vocabSize, 2);
      const s = ex.stats();
      expect([s.running, s.waiting]).toEqual([0, 0]);
      expect(s.totalTokens).toBeGreaterThan(0);
      expect(s.usedTokens).toBeGreaterThanOrEqual(0);
    });

    it("refuses requests once closed, and closes twice without error", async () => {
      await ex.close();
      closed = true;
      await expect(ex.generate(req())).rejects.toThrow();
      await ex.close();
    });
  });
}

function checkResult(r: GenerateResult, maxTokens: number, stops: readonly number[], vocabSize: number, topLogprobs: number): void {
  expect(r.tokens.length).toBeGreaterThanOrEqual(1);
  expect(r.tokens.length).toBeLessThanOrEqual(maxTokens);
  for (const t of r.tokens) {
    expect(Number.isInteger(t.id) && t.id >= 0 && t.id < vocabSize).toBe(true);
    expect(t.logprob).toBeLessThanOrEqual(0);
    expect(Number.isNaN(t.logprob)).toBe(false);
    expect(t.top.length).toBeLessThanOrEqual(topLogprobs);
  }
  if (r.finishReason === "stop") {
    expect(stops).toContain(r.stopTokenId);
    expect(r.tokens.at(-1)?.id).toBe(r.stopTokenId);
  } else {
    expect(r.finishReason).toBe("length");
    expect(r.tokens).toHaveLength(maxTokens);
  }
}
