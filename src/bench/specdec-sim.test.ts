// Speculation through the production scheduler and the adaptive budget on Llama-3-8B/H100 timing (the
// cost model, virtual clock): it pays off for a lone long-tail request; for a large batch, where decode is
// compute bound, verifying every draft costs more than it gives and the budget verifies far fewer of them,
// finishing before both. The same tokens in every mode; deterministic.
import { describe, expect, it } from "vitest";
import { LLAMA3_8B_H100 } from "../engine/costmodel/profile.js";
import { simulateSpeculation, type SpecSimOptions } from "./specdec-sim.js";

const base = { profile: LLAMA3_8B_H100, promptTokens: 512, outputTokens: 256, maxSpecTokens: 6, meanAcceptanceLength: 2.85 };
const run = (requests: number, mode: SpecSimOptions["mode"]) => simulateSpeculation({ ...base, requests, mode });

describe("speculation through the scheduler on Llama-3-8B/H100 timing", () => {
  it("pays off for a lone request", () => {
    const none = run(1, "none");
    const full = run(1, "full");
    const adaptive = run(1, "adaptive");
    expect(full.outputs).toEqual(none.outputs);
    expect(adaptive.outputs).toEqual(none.outputs);
    expect(none.draftTokens).toBe(0);
    // Decode is memory bound at batch 1: verifying 6 drafts costs about one step and gives ~2.85 tokens.
    expect(full.ms).toBeLessThan(none.ms * 0.6);
    expect(adaptive.ms).toBeLessThan(none.ms * 0.6);
    // Modelled acceptance: ~1.85 accepted per 6-token draft.
    expect(full.acceptedTokens / (full.draftTokens / 6)).toBeGreaterThan(1.5);
    expect(full.acceptedTokens / (full.draftTokens / 6)).toBeLessThan(2.2);
  });

  it("for 384 requests the budget verifies a fraction of the drafts and beats both none and full drafts", () => {
    const none = run(384, "none");
    const full = run(384, "full");
    const adaptive = run(384, "adaptive");
    expect(full.outputs).toEqual(none.outputs);
    expect(adaptive.outputs).toEqual(none.outputs);
    // 384 × 7 tokens a step is far past the compute-bound threshold: full drafts cost more than they give.
    expect(full.ms).toBeGreaterThan(none.ms);
    expect(adaptive.draftTokens).toBeLessThan(full.draftTokens / 2);
    expect(adaptive.ms).toBeLessThan(none.ms);
    expect(adaptive.ms).toBeLessThan(full.ms);
  });

  it("is deterministic", () => {
    expect(run(8, "adaptive")).toEqual(run(8, "adaptive"));
  });
});
