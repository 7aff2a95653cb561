import { describe, expect, it } from "vitest";
import { COST_PROFILES, getCostProfile, KIMI_K2_H800_DP16, LLAMA3_70B_H200_TP4, LLAMA3_8B_H100, MOONLIGHT_16B_A3B_H800, QWEN2_VL_72B_H800_TP8, validateCostProfile } from "./profile.js";

describe("cost profiles", () => {
  it("ships the profiles, each valid and named by its key", () => {
    expect(Object.keys(COST_PROFILES).sort()).toEqual(["kimi-k2/h800-dp16-ep16", "llama-3-70b/h200-tp4", "llama-3-8b/h100", "moonlight-16b-a3b/h800", "qwen2-vl-72b/h800-tp8"]);
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

  it("derives Seer's models from their configs: MLA latents, MoE rooflines, capacities", () => {
    // MLA: (kv_lora_rank 512 + rope 64) × layers × 2 B.
    expect(MOONLIGHT_16B_A3B_H800.kvBytesPerToken).toBe(27 * 576 * 2);
    expect(KIMI_K2_H800_DP16.kvBytesPerToken).toBe(61 * 576 * 2);
    expect(QWEN2_VL_72B_H800_TP8.kvBytesPerToken).toBe(2 * 80 * 8 * 128 * 2);
    // The MoE roofline turns compute bound where streaming every expert costs as much as the active ones' FLOPs.
    const m = MOONLIGHT_16B_A3B_H800;
    expect(m.computeBoundThresholdTokens).toBe(Math.round(m.mlpMemoryBoundMs / m.mlpComputeBoundPerTokenMs));
    // Capacities from the free memory after the weights: Moonlight ~1.29 M tokens on one GPU, Kimi-K2 ~1.79 M on 16.
    expect(m.hbmKvCapacityTokens).toBeGreaterThan(1.25e6);
    expect(m.hbmKvCapacityTokens).toBeLessThan(1.35e6);
    expect(KIMI_K2_H800_DP16.hbmKvCapacityTokens).toBeGreaterThan(1.6e6);
    expect(KIMI_K2_H800_DP16.hbmKvCapacityTokens).toBeLessThan(2e6);
    // A Moonlight decode step of 100 sequences at 30 k context lands in tens of ms: floor + attention.
    const step = m.decodeBaseMs + 100 * m.decodePerSeqMs + m.mlpMemoryBoundMs + 100 * 30_000 * m.attnPerKvTokenMs;
    expect(step).toBeGreaterThan(20);
    expect(step).toBeLessThan(100);
  });
});
