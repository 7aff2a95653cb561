import { describe, expect, it } from "vitest";
import { COST_PROFILES, getCostProfile, LLAMA3_70B_H200_TP4, LLAMA3_8B_H100, validateCostProfile } from "./profile.js";

describe("cost profiles", () => {
  it("ships the two profiles, each valid and named by its key", () => {
    expect(Object.keys(COST_PROFILES).sort()).toEqual(["llama-3-70b/h200-tp4", "llama-3-8b/h100"]);
    for (const [k, p] of Object.entries(COST_PROFILES)) {
      expect(p.name).toBe(k);
      expect(validateCostProfile(p)).toBe(p);
    }
  });

  it("derives the KV figures from the model shapes and datasheets", () => {
    expect(LLAMA3_8B_H100.kvBytesPerToken).toBe(128 * 1024); // §F: 128 KiB
    expect(LLAMA3_70B_H200_TP4.kvBytesPerToken).toBe(320 * 1024);
    expect(LLAMA3_8B_H100.attnPerKvTokenMs).toBeCloseTo(131072 / 3.35e9, 15);
    expect(LLAMA3_8B_H100.hbmKvCapacityTokens).toBe(Math.floor((0.9 * 80e9 - 16.06e9) / 131072));
    expect(LLAMA3_70B_H200_TP4.computeBoundThresholdTokens).toBe(89);
  });

  it("reproduces §F's batch-1 figures from its parts", () => {
    const p = LLAMA3_8B_H100;
    expect(p.decodeBaseMs + p.decodePerSeqMs + p.mlpMemoryBoundMs).toBeCloseTo(12, 10);
    // prefill of 1000 tokens: base + 0.23 × 1000 + 5.6 + 0.02 × (1000 − 128) = 30 + 0.25 × 1000
    const n = 1000;
    const t = p.prefillBaseMs + p.prefillPerTokenMs * n + p.mlpMemoryBoundMs + p.mlpComputeBoundPerTokenMs * (n - 128);
    expect(t).toBeCloseTo(30 + 0.25 * n, 10);
  });

  it("rejects unknown names and bad fields, naming them", () => {
    expect(() => getCostProfile("gpt-5/tpu")).toThrow(/unknown cost profile "gpt-5\/tpu".*llama-3-8b\/h100/);
    expect(getCostProfile("llama-3-8b/h100")).toBe(LLAMA3_8B_H100);
    expect(() => validateCostProfile({ ...LLAMA3_8B_H100, attnPerKvTokenMs: Number.NaN })).toThrow(/attnPerKvTokenMs/);
    expect(() => validateCostProfile({ ...LLAMA3_8B_H100, l3BandwidthBytesPerMs: 0 })).toThrow(/l3BandwidthBytesPerMs/);
    expect(() => validateCostProfile({ ...LLAMA3_8B_H100, blockSize: 1.5 })).toThrow(/blockSize/);
  });
});
