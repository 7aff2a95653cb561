import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { GenerateResult } from "../../backends/backend.js";
import { ChunkPlanner, type ChunkRequest } from "./chunk-planner.js";

const PROMPT = [1, 10, 11];

/** A backend answer to `c`: `ids` as output, logprob -(id/100), version `v`. */
function answer(c: ChunkRequest, ids: number[], finishReason: GenerateResult["finishReason"], v: number | null = 3): GenerateResult {
  return { outputTokenIds: ids, logprobs: ids.map((t) => -t / 100), finishReason, policyVersion: v, promptTokenIds: [...c.promptTokenIds] };
}

describe("ChunkPlanner", () => {
  it("asks min(chunk, max_tokens − generated), continuing from prompt ‖ tokens so far, and stitches the answers", () => {
    const p = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 7, chunkTokens: 3, maxChunks: 10 });
    const c0 = p.next() as ChunkRequest;
    expect(c0).toEqual({ index: 0, promptTokenIds: PROMPT, maxTokens: 3 });
    p.record("a", answer(c0, [20, 21, 22], "length", 3));
    const c1 = p.next() as ChunkRequest;
    expect(c1).toEqual({ index: 1, promptTokenIds: [...PROMPT, 20, 21, 22], maxTokens: 3 });
    p.record("b", answer(c1, [23, 24, 25], "length", 4));
    const c2 = p.next() as ChunkRequest;
    expect(c2).toEqual({ index: 2, promptTokenIds: [...PROMPT, 20, 21, 22, 23, 24, 25], maxTokens: 1 });
    p.record("a", answer(c2, [26], "length", 4));
    expect(p.done).toBe(true);
    expect(p.next()).toBeNull();
    const r = p.result();
    expect(r).toMatchObject({
      outputTokenIds: [20, 21, 22, 23, 24, 25, 26],
      logprobs: [-0.2, -0.21, -0.22, -0.23, -0.24, -0.25, -0.26],
      finishReason: "length",
      promptTokenIds: PROMPT,
      tokenPolicyVersions: [3, 3, 3, 4, 4, 4, 4],
      policyVersion: 3,
    });
    expect(r.chunks.map((c) => [c.backend, c.promptTokens, c.maxTokens, c.outputTokens, c.finishReason])).toEqual([
      ["a", 3, 3, 3, "length"],
      ["b", 6, 3, 3, "length"],
      ["a", 9, 1, 1, "length"],
    ]);
  });

  it("ends on a stop finish, on a stop token the engine did not flag, and on an abort", () => {
    const stop = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 10, chunkTokens: 4, maxChunks: 5 });
    stop.record("a", answer(stop.next() as ChunkRequest, [20, 2], "stop"));
    expect(stop.done).toBe(true);
    expect(stop.result()).toMatchObject({ outputTokenIds: [20, 2], finishReason: "stop" });

    const token = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 10, chunkTokens: 4, maxChunks: 5, stopTokenIds: [2] });
    token.record("a", answer(token.next() as ChunkRequest, [20, 21, 22, 2], "length"));
    expect(token.next()).toBeNull();
    expect(token.result().finishReason).toBe("stop");

    const abort = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 10, chunkTokens: 4, maxChunks: 5 });
    abort.record("a", answer(abort.next() as ChunkRequest, [20, 21, 22, 23], "length"));
    abort.record("b", answer(abort.next() as ChunkRequest, [24], "abort"));
    expect(abort.next()).toBeNull();
    expect(abort.result()).toMatchObject({ outputTokenIds: [20, 21, 22, 23, 24], finishReason: "abort" });
  });

  it("ends when an engine stops at its own length limit short of what was asked", () => {
    const p = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 10, chunkTokens: 4, maxChunks: 5 });
    p.record("a", answer(p.next() as ChunkRequest, [20, 21], "length"));
    expect(p.next()).toBeNull();
    expect(p.result()).toMatchObject({ outputTokenIds: [20, 21], finishReason: "length" });
  });

  it("abandons an open chunk with abort, keeping the tokens of the chunks before", () => {
    const p = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 10, chunkTokens: 4, maxChunks: 5 });
    p.record("a", answer(p.next() as ChunkRequest, [20, 21, 22, 23], "length"));
    p.next();
    p.abort();
    expect(p.next()).toBeNull();
    expect(p.result()).toMatchObject({ outputTokenIds: [20, 21, 22, 23], finishReason: "abort" });
  });

  it("reports the oldest version of the tokens, null only when no chunk reported one", () => {
    const p = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 4, chunkTokens: 2, maxChunks: 5 });
    p.record("a", answer(p.next() as ChunkRequest, [20, 21], "length", 7));
    p.record("b", answer(p.next() as ChunkRequest, [22, 23], "length", 5));
    expect(p.result()).toMatchObject({ policyVersion: 5, tokenPolicyVersions: [7, 7, 5, 5] });
    const q = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 2, chunkTokens: 2, maxChunks: 5 });
    q.record("a", answer(q.next() as ChunkRequest, [20, 21], "length", null));
    expect(q.result()).toMatchObject({ policyVersion: null, tokenPolicyVersions: [null, null] });
  });

  it("refuses answers that do not fit the chunk, naming the chunk and backend", () => {
    const mk = () => new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 10, chunkTokens: 2, maxChunks: 5 });
    const over = mk();
    expect(() => over.record("a", answer(over.next() as ChunkRequest, [20, 21, 22], "length"))).toThrow(/chunk 0 from backend 'a' returned 3 tokens, over the 2 asked/);
    const misaligned = mk();
    const c = misaligned.next() as ChunkRequest;
    expect(() => misaligned.record("a", { ...answer(c, [20, 21], "length"), logprobs: [-1] })).toThrow(/1 logprobs for 2 tokens/);
    const echo = mk();
    const e = echo.next() as ChunkRequest;
    expect(() => echo.record("b", { ...answer(e, [20], "length"), promptTokenIds: [9, ...PROMPT] })).toThrow(/echoed a prompt of 4 tokens/);
  });

  it("refuses a budget needing more chunks than allowed, bad options, and out-of-order calls", () => {
    expect(() => new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 100, chunkTokens: 10, maxChunks: 9 })).toThrow(
      /needs 10 chunks, over the limit maxChunks 9/,
    );
    expect(() => new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 100, chunkTokens: 0, maxChunks: 9 })).toThrow(/chunkTokens must be an integer >= 1/);
    expect(() => new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 1.5, chunkTokens: 1, maxChunks: 9 })).toThrow(/maxTokens/);
    expect(() => new ChunkPlanner({ promptTokenIds: [], maxTokens: 1, chunkTokens: 1, maxChunks: 9 })).toThrow(/promptTokenIds/);
    const p = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens: 4, chunkTokens: 2, maxChunks: 5 });
    expect(() => p.record("a", answer({ index: 0, promptTokenIds: PROMPT, maxTokens: 2 }, [1], "length"))).toThrow(/no chunk is open/);
    p.next();
    expect(() => p.next()).toThrow(/chunk 0 was planned but its outcome not recorded/);
  });

  it("for any budget, chunk size and engine answers: the chunks' asks cover the budget and the result is their concatenation", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 3, max: 300 }), { minLength: 60, maxLength: 60 }),
        fc.integer({ min: 0, max: 80 }),
        (maxTokens, chunkTokens, stream, stopAt) => {
          // The "engine": an unbroken stream of tokens; stop token 2 at index stopAt (if in range).
          const tokens = stream.map((t, i) => (i === stopAt ? 2 : t));
          const p = new ChunkPlanner({ promptTokenIds: PROMPT, maxTokens, chunkTokens, maxChunks: 1000, stopTokenIds: [2] });
          let chunks = 0;
          for (let c = p.next(); c; c = p.next()) {
            chunks++;
            const from = c.promptTokenIds.length - PROMPT.length;
            expect(c.promptTokenIds).toEqual([...PROMPT, ...tokens.slice(0, from)]);
            expect(c.maxTokens).toBe(Math.min(chunkTokens, maxTokens - from));
            let out = tokens.slice(from, from + c.maxTokens);
            const s = out.indexOf(2);
            if (s >= 0) out = out.slice(0, s + 1);
            p.record(chunks % 2 ? "a" : "b", answer(c, out, s >= 0 ? "stop" : "length"));
          }
          const expectedLen = stopAt < maxTokens ? stopAt + 1 : maxTokens;
          const r = p.result();
          expect(r.outputTokenIds).toEqual(tokens.slice(0, expectedLen));
          expect(r.finishReason).toBe(stopAt < maxTokens ? "stop" : "length");
          expect(chunks).toBe(Math.ceil(expectedLen / chunkTokens));
          expect(r.chunks.reduce((s, c) => s + c.outputTokens, 0)).toBe(expectedLen);
        },
      ),
      { numRuns: 300 },
    );
  });
});
