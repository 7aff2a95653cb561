import { describe, expect, it } from "vitest";
import { batchLatencyMs, CALIBRATED_PROFILES, calibrationTable } from "./calibration.js";
import { COST_PROFILES } from "./profile.js";
import { ROUND_PROFILE } from "../../testing/costmodel-helpers.js";

describe("calibrationTable", () => {
  it("the calibrated profiles are the two with published points; the others are derived only", () => {
    expect([...CALIBRATED_PROFILES].sort()).toEqual(["llama-3-70b/h200-tp4", "llama-3-8b/h100"]);
  });

  for (const p of Object.values(COST_PROFILES).filter((x) => CALIBRATED_PROFILES.includes(x.name))) {
    it(`${p.name}: every cited reference point is matched within 10%`, () => {
      const rows = calibrationTable(p);
      const cited = rows.filter((r) => r.reference);
      expect(cited.length).toBeGreaterThanOrEqual(3);
      for (const r of cited) {
        expect(r.reference?.source).toMatch(/\S/);
        expect(Math.abs(r.errorPct ?? Infinity), r.case).toBeLessThan(10);
      }
      // the model-only curve: throughput grows with batch size
      const tput = rows.filter((r) => !r.reference && r.case.startsWith("decode throughput")).map((r) => r.model);
      expect(tput.length).toBeGreaterThan(2);
      tput.slice(1).forEach((t, i) => expect(t).toBeGreaterThan(tput[i] ?? Infinity));
    });
  }

  for (const p of Object.values(COST_PROFILES).filter((x) => !CALIBRATED_PROFILES.includes(x.name))) {
    it(`${p.name} (derived only): its decode throughput grows with batch size`, () => {
      const tput = calibrationTable(p).filter((r) => r.case.startsWith("decode throughput")).map((r) => r.model);
      expect(tput.length).toBeGreaterThan(2);
      tput.slice(1).forEach((t, i) => expect(t).toBeGreaterThan(tput[i] ?? Infinity));
    });
  }

  it("a profile without published points gets only model rows", () => {
    expect(calibrationTable(ROUND_PROFILE).every((r) => r.reference === undefined && r.errorPct === undefined)).toBe(true);
  });

  it("batchLatencyMs adds one prefill step and output − 1 decode steps (hand-worked)", () => {
    // prefill 2 × 3 tokens: 10 + 6 + mlp(6) 2.2 = 18.2; decode k=1,2 (kv 4, 5 each):
    // 4 + 1 + 2 × 4 × 0.01 + 2 = 7.08, and 4 + 1 + 0.1 + 2 = 7.1
    expect(batchLatencyMs(ROUND_PROFILE, 2, 3, 3)).toBeCloseTo(18.2 + 7.08 + 7.1, 10);
  });

});
