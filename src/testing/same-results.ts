// Test support: two executors' generations are the same — token ids, finish reasons, stop tokens, the top
// alternatives' ids, and logprobs within a tolerance (llama.cpp's float rounding differs with batch shapes).
import { expect } from "vitest";
import type { GenerateResult } from "../engine/executor.js";

/** Assert `got` equals `want` request by request (logprobs and top logprobs within `tolerance`). */
export function expectSameResults(got: GenerateResult[], want: GenerateResult[], tolerance = 1e-5): void {
  expect(got.map((r) => r.tokens.map((t) => t.id))).toEqual(want.map((r) => r.tokens.map((t) => t.id)));
  expect(got.map((r) => [r.finishReason, r.stopTokenId])).toEqual(want.map((r) => [r.finishReason, r.stopTokenId]));
  got.forEach((g, i) =>
    g.tokens.forEach((t, k) => {
      const w = want[i]!.tokens[k]!;
      expect(Math.abs(t.logprob - w.logprob)).toBeLessThan(tolerance);
      expect(t.top.map((x) => x.id)).toEqual(w.top.map((x) => x.id));
      t.top.forEach((x, j) => expect(Math.abs(x.logprob - w.top[j]!.logprob)).toBeLessThan(tolerance));
    }),
  );
}
