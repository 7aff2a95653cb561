import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_SPEC_TOKENS, resolveSpeculative, type SpeculativeOptions } from "./speculative-options.js";

describe("resolveSpeculative", () => {
  it("fills the defaults and passes the drafter's knobs through", () => {
    expect(resolveSpeculative({ method: "suffix" })).toEqual({ method: "suffix", draft: { maxSpecTokens: DEFAULT_MAX_SPEC_TOKENS }, cache: {}, adaptive: true });
    expect(resolveSpeculative({ method: "draft-model", draftModel: "/m/draft.gguf", maxSpecTokens: 3 })).toEqual({
      method: "draft-model",
      draft: { maxSpecTokens: 3 },
      cache: {},
      adaptive: true,
      draftModel: "/m/draft.gguf",
    });
    expect(resolveSpeculative({ method: "suffix", maxSpecTokens: 4, minTokenProb: 0.2, maxSpecFactor: 2, maxSpecOffset: 1, maxCachedResponses: 0, adaptive: false })).toEqual({
      method: "suffix",
      draft: { maxSpecTokens: 4, minTokenProb: 0.2, maxSpecFactor: 2, maxSpecOffset: 1 },
      cache: { maxCachedResponses: 0 },
      adaptive: false,
    });
    expect(resolveSpeculative({ method: "suffix", draftService: { url: "http://engine-a:8001", timeoutMs: 500 } }).draftService).toEqual({ url: "http://engine-a:8001", timeoutMs: 500 });
  });

  it("refuses bad values, naming the field", () => {
    const bad = (s: Partial<SpeculativeOptions>) => () => resolveSpeculative({ method: "suffix", ...s } as SpeculativeOptions);
    expect(bad({ method: "ngram" as "suffix" })).toThrow(/speculative\.method: must be "suffix" or "draft-model", got "ngram"/);
    expect(bad({ draftModel: "/m/d.gguf" })).toThrow(/speculative\.draftModel: only with method "draft-model"/);
    expect(bad({ method: "draft-model", draftModel: "" })).toThrow(/speculative\.draftModel: must be a GGUF path/);
    expect(bad({ adaptive: "yes" as unknown as boolean })).toThrow(/speculative\.adaptive: must be true or false, got "yes"/);
    expect(bad({ maxSpecTokens: 0 })).toThrow(/speculative\.maxSpecTokens: must be an integer >= 1, got 0/);
    expect(bad({ maxSpecTokens: 2.5 })).toThrow(/speculative\.maxSpecTokens/);
    expect(bad({ minTokenProb: 1.5 })).toThrow(/speculative\.minTokenProb: must be a number in \[0, 1\]/);
    expect(bad({ maxSpecFactor: -1 })).toThrow(/speculative\.maxSpecFactor/);
    expect(bad({ maxSpecOffset: Number.NaN })).toThrow(/speculative\.maxSpecOffset/);
    expect(bad({ maxCachedResponses: -1 })).toThrow(/speculative\.maxCachedResponses/);
    expect(bad({ draftService: { url: "engine-a:8001" } })).toThrow(/speculative\.draftService\.url: must be an http\(s\) base URL/);
    expect(bad({ draftService: { url: "http://a:1", timeoutMs: 0 } })).toThrow(/speculative\.draftService\.timeoutMs: must be an integer >= 1/);
    expect(bad({ method: "draft-model", draftModel: "/m/d.gguf", draftService: { url: "http://a:1" } })).toThrow(/speculative\.draftService: only with method "suffix"/);
  });
});
