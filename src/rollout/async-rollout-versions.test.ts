import { describe, expect, it } from "vitest";
import type { Call } from "../core/types.js";
import { callVersionSpans } from "./async-rollout-versions.js";

const call = (index: number, policyVersion: number, tokens: number): Call => ({
  id: `c${index}`,
  programId: "p",
  index,
  messages: [],
  promptTokenIds: [1],
  outputTokenIds: Array.from({ length: tokens }, (_, i) => i + 2),
  logprobs: Array.from({ length: tokens }, () => -1),
  outputText: "",
  finishReason: "stop",
  backend: "e0",
  policyVersion,
  timings: { start: 0, end: 1 },
});

describe("callVersionSpans", () => {
  it("run-length encodes the calls' versions in call order, relative to the base", () => {
    expect(callVersionSpans([call(2, 5, 4), call(0, 4, 3), call(1, 4, 2)], 4)).toEqual({
      spans: [
        { version: 0, tokens: 5 },
        { version: 1, tokens: 4 },
      ],
      inverted: 0,
    });
  });

  it("skips calls without output and counts tokens of a call older than an earlier one in the newer span", () => {
    expect(callVersionSpans([call(0, 1, 3), call(1, 2, 0), call(2, 2, 2), call(3, 1, 4), call(4, 3, 1)], 0)).toEqual({
      spans: [
        { version: 1, tokens: 3 },
        { version: 2, tokens: 6 },
        { version: 3, tokens: 1 },
      ],
      inverted: 4,
    });
    expect(callVersionSpans([], 0)).toEqual({ spans: [], inverted: 0 });
  });

  it("counts each token of a call resumed on new weights at its own version", () => {
    const resumed = { ...call(1, 6, 4), tokenPolicyVersions: [5, 5, 6, 6] };
    expect(callVersionSpans([call(0, 5, 2), resumed, call(2, 6, 1)], 5)).toEqual({
      spans: [
        { version: 0, tokens: 4 },
        { version: 1, tokens: 3 },
      ],
      inverted: 0,
    });
    // Tokens of a resumed call older than an earlier call's version join the newer span.
    expect(callVersionSpans([call(0, 6, 2), resumed], 5)).toEqual({ spans: [{ version: 1, tokens: 6 }], inverted: 2 });
  });
});
